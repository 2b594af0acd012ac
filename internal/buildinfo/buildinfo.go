// Package buildinfo says which build of redlock-proxy is running: the
// version the Makefile stamps in from `git describe` (-ldflags -X), or,
// for a plain `go build` or `go install`, what the Go toolchain recorded
// (the module version, or the VCS revision), or "devel".
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version is set at link time by the Makefile:
//
//	-ldflags "-X github.com/redlock-proxy/redlock-proxy/internal/buildinfo.version=0.2.0"
//
// It is written only by the linker.
var version string

// Version returns the build's version: the one stamped at link time, else
// the module version recorded by `go install module@version`, else
// "devel+<revision>" when the build recorded its VCS revision (with
// "-dirty" for uncommitted changes), else "devel".
func Version() string {
	if version != "" {
		return strings.TrimPrefix(version, "v")
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return strings.TrimPrefix(v, "v")
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + rev + dirty
}
