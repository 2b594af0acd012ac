// Package deploy holds the deployment files (compose, Kubernetes,
// Grafana, Prometheus); its test checks them against the code, since no
// Docker engine or cluster runs where the tests do.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/redlock-proxy/redlock-proxy/config"
	"github.com/redlock-proxy/redlock-proxy/metrics"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// The image's contract, from the Dockerfile.
const (
	configPath  = "/etc/redlock-proxy/config.yaml"
	respPort    = "6380"
	metricsPort = "9121"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDockerfile: Go as in go.mod, no configuration baked in, all
// interfaces through the environment, the ports and config path the
// deployment files use.
func TestDockerfile(t *testing.T) {
	df := string(read(t, "../Dockerfile"))
	gomod := string(read(t, "../go.mod"))
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(gomod)[1]
	if !strings.Contains(df, "FROM golang:"+goVersion+"-") {
		t.Errorf("the Dockerfile does not build with go.mod's Go %s", goVersion)
	}
	if strings.Contains(df, "COPY config.yaml") {
		t.Error("the image bakes in a configuration")
	}
	for _, want := range []string{
		"REDLOCK_PROXY_LISTEN=0.0.0.0:" + respPort,
		"REDLOCK_PROXY_METRICS_LISTEN=0.0.0.0:" + metricsPort,
		"EXPOSE " + respPort + " " + metricsPort,
		`"--config", "` + configPath + `"`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
}

// TestCompose: the compose file parses, its proxies mount a configuration
// the proxy accepts at the image's path, whose masters are the compose
// services, publish the image's ports, and get a stop grace period longer
// than the proxy's 10 s drain.
func TestCompose(t *testing.T) {
	var doc struct {
		Services map[string]struct {
			Image           string   `yaml:"image"`
			Command         []string `yaml:"command"`
			Volumes         []string `yaml:"volumes"`
			Ports           []string `yaml:"ports"`
			StopGracePeriod string   `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(read(t, "docker-compose.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	proxies := 0
	for name, svc := range doc.Services {
		if !strings.HasPrefix(name, "proxy") {
			continue
		}
		proxies++
		if len(svc.Volumes) != 1 {
			t.Fatalf("%s: volumes %v", name, svc.Volumes)
		}
		src, dst, _ := strings.Cut(strings.TrimSuffix(svc.Volumes[0], ":ro"), ":")
		if dst != configPath {
			t.Errorf("%s mounts its configuration at %s, the image reads %s", name, dst, configPath)
		}
		cfg, err := config.Parse(read(t, src))
		if err != nil {
			t.Fatalf("%s: %s: %v", name, src, err)
		}
		for _, m := range cfg.Masters {
			host, _, _ := strings.Cut(m.Addr, ":")
			if _, ok := doc.Services[host]; !ok {
				t.Errorf("%s: master %s is not a compose service", name, m.Addr)
			}
		}
		if len(cfg.Masters) < 3 || len(cfg.Masters)%2 == 0 {
			t.Errorf("%s: %d masters, want an odd number, at least 3", name, len(cfg.Masters))
		}
		published := map[string]bool{}
		for _, p := range svc.Ports {
			_, c, _ := strings.Cut(p, ":")
			published[c] = true
		}
		if !published[respPort] || !published[metricsPort] {
			t.Errorf("%s publishes %v, want the image's %s and %s", name, svc.Ports, respPort, metricsPort)
		}
		if d, err := time.ParseDuration(svc.StopGracePeriod); err != nil || d < 15*time.Second {
			t.Errorf("%s: stop_grace_period %q, want at least 15s", name, svc.StopGracePeriod)
		}
	}
	if proxies < 2 {
		t.Errorf("%d proxies, want at least 2", proxies)
	}
}

// TestKubernetes: the manifests parse; the Deployment runs 2+ replicas of
// the image with probes on /readyz and /healthz, resource requests, the
// ConfigMap mounted where the image reads it (and accepted by the
// proxy), a grace period above the drain; a Service and a PDB select it.
func TestKubernetes(t *testing.T) {
	type container struct {
		Args           []string `yaml:"args"`
		ReadinessProbe struct {
			HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
		} `yaml:"readinessProbe"`
		LivenessProbe struct {
			HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
		} `yaml:"livenessProbe"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	type object struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Replicas     int `yaml:"replicas"`
			MinAvailable int `yaml:"minAvailable"`
			Template     struct {
				Spec struct {
					TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
					Containers                    []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
			Ports []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	kinds := map[string][]object{}
	for _, f := range []string{"kubernetes/proxy.yaml", "kubernetes/configmap.yaml", "kubernetes/masters.yaml"} {
		dec := yaml.NewDecoder(bytes.NewReader(read(t, f)))
		for {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			kinds[o.Kind] = append(kinds[o.Kind], o)
		}
	}
	var dep *object
	for i, d := range kinds["Deployment"] {
		if d.Metadata.Name == "redlock-proxy" {
			dep = &kinds["Deployment"][i]
		}
	}
	if dep == nil {
		t.Fatal("no redlock-proxy Deployment")
	}
	if dep.Spec.Replicas < 2 {
		t.Errorf("%d replicas", dep.Spec.Replicas)
	}
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g < 15 {
		t.Errorf("terminationGracePeriodSeconds %d, want at least 15", g)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports[c.ReadinessProbe.HTTPGet.Port] != 9121 || ports["resp"] != 6380 {
		t.Errorf("container ports %v", ports)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Error("no resource requests")
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath+"/config.yaml" != configPath || !strings.Contains(strings.Join(c.Args, " "), configPath) {
		t.Errorf("config mounted at %+v, args %v, the image reads %s", c.VolumeMounts, c.Args, configPath)
	}
	if len(kinds["ConfigMap"]) != 1 {
		t.Fatal("no ConfigMap")
	}
	if _, err := config.Parse([]byte(kinds["ConfigMap"][0].Data["config.yaml"])); err != nil {
		t.Errorf("the ConfigMap's config.yaml: %v", err)
	}
	if len(kinds["PodDisruptionBudget"]) != 1 || kinds["PodDisruptionBudget"][0].Spec.MinAvailable < 1 {
		t.Error("no PodDisruptionBudget keeping a replica")
	}
	found := false
	for _, s := range kinds["Service"] {
		if s.Metadata.Name == "redlock-proxy" {
			found = len(s.Spec.Ports) == 2 && s.Spec.Ports[0].Port == 6380
		}
	}
	if !found {
		t.Error("no redlock-proxy Service on 6380")
	}
}

// TestDashboardAndAlertsUseRealMetrics: every redlock_proxy_* metric the
// Grafana dashboard and the alert rules name is one the proxy exports.
func TestDashboardAndAlertsUseRealMetrics(t *testing.T) {
	// A registry with every metric present (vectors need a child).
	m := metrics.New(func() []quorum.NodeStatus {
		return []quorum.NodeStatus{{Addr: "m1", State: quorum.StateUp}}
	})
	m.Command("rlock", time.Millisecond, "granted", "")
	m.Operation("lock", quorum.OutcomeOK, time.Millisecond)
	m.MasterCall("m1", time.Millisecond, nil)
	m.Connections(1)
	m.Rejected()
	m.Dropped("timeout")
	m.AuthFailed()
	m.LeaseEvent("extended")
	m.AutoLeases(1)
	m.DropinScript("x")
	m.Waiting(func() int { return 0 })
	names := map[string]bool{}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	dash := read(t, "grafana/redlock-proxy.json")
	var parsed map[string]any
	if err := json.Unmarshal(dash, &parsed); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	alerts := read(t, "prometheus/alerts.yaml")
	if err := yaml.Unmarshal(alerts, &rules); err != nil || len(rules.Groups) == 0 || len(rules.Groups[0].Rules) < 5 {
		t.Fatalf("alerts: %v %+v", err, rules)
	}
	used := regexp.MustCompile(`redlock_proxy_[a-z_]+`)
	for file, text := range map[string][]byte{"dashboard": dash, "alerts": alerts} {
		n := 0
		for _, name := range used.FindAllString(string(text), -1) {
			n++
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !names[base] {
				t.Errorf("%s uses %s, which the proxy does not export", file, name)
			}
		}
		if n == 0 {
			t.Errorf("%s names no metric", file)
		}
	}
}
