package metrics

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlock-proxy/redlock-proxy/internal/buildinfo"
)

// buildInfoCollector is go_build_info as client_golang's build-info
// collector exports it (path, version, checksum of the main module), with
// the proxy's version (buildinfo.Version: the one the Makefile stamps in)
// instead of the toolchain's "(devel)".
func buildInfoCollector() prometheus.Collector {
	path, sum := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		path, sum = bi.Main.Path, bi.Main.Sum
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "go_build_info",
		Help:        "Build information about the main Go module.",
		ConstLabels: prometheus.Labels{"path": path, "version": buildinfo.Version(), "checksum": sum},
	})
	g.Set(1)
	return g
}
