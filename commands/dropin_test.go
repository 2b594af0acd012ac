package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
)

// TestDropinTable: every recorded script has an operation and every
// operation a recorded script, each under its own SHA1.
func TestDropinTable(t *testing.T) {
	d := newDropin(nil, Limits{})
	ops := dropinOps()
	if len(d.bySHA) != len(ops) || len(d.names) != len(ops) {
		t.Fatalf("%d scripts recorded, %d distinct SHA1s, %d operations", len(d.names), len(d.bySHA), len(ops))
	}
	for sha, s := range d.bySHA {
		b, err := dropinScripts.ReadFile("dropin/" + s.name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum(b)
		if hex.EncodeToString(sum[:]) != sha {
			t.Errorf("%s: SHA1 %s, indexed as %s", s.name, hex.EncodeToString(sum[:]), sha)
		}
	}
	// go-redsync ships the SHA1 of each of its scripts: the recordings
	// must match them.
	for name, want := range map[string]string{
		"go-redsync@v4.18.1/delete":      "e950836ed1e694540c503ef9972b8de518044d3b",
		"go-redsync@v4.18.1/touch":       "d75bb8b5bd13532ddedd17762e772346e39b321e",
		"go-redsync@v4.18.1/touch_setnx": "b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79",
	} {
		if s := d.bySHA[want]; s == nil || s.name != name {
			t.Errorf("%s is not recorded under go-redsync's SHA1 %s", name, want)
		}
	}
}
