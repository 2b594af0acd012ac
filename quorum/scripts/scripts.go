// Package scripts holds the Lua scripts the proxy runs on the masters, one
// file per operation, named <primitive>_<operation>.lua. quorum names a
// script by its file name without ".lua"; quorum/redisnode loads them all
// and runs them with EVALSHA (EVAL on NOSCRIPT); the engine's unit tests
// run the same files on embedded masters, so the scripts themselves are
// what the tests exercise.
//
// Every script is atomic on its master, idempotent and token-checked: a
// resend can never report a false "taken" nor touch another owner's keys.
package scripts

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.lua
var files embed.FS

// All returns every script's source by name (the file name without
// ".lua").
func All() map[string]string {
	out := map[string]string{}
	names, _ := fs.Glob(files, "*.lua")
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			continue // cannot happen: the file is embedded
		}
		out[strings.TrimSuffix(n, ".lua")] = string(b)
	}
	return out
}
