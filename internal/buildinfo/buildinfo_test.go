package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install module@version", debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "0.2.0"},
		{"pseudo-version", debug.BuildInfo{Main: debug.Module{Version: "v0.1.1-0.20261124183000-0123456789ab"}}, "0.1.1-0.20261124183000-0123456789ab"},
		{"go build in a clone", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0ab2a51f00d1e2c3b4a5968778695a4b3c2d1e0f"}, {Key: "vcs.modified", Value: "false"}}}, "devel+0ab2a51f00d1"},
		{"uncommitted changes", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0ab2a51f00d1e2c3b4a5968778695a4b3c2d1e0f"}, {Key: "vcs.modified", Value: "true"}}}, "devel+0ab2a51f00d1-dirty"},
		{"-buildvcs=false", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"nothing recorded", debug.BuildInfo{}, "devel"},
	} {
		if got := fromBuildInfo(&tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
