// Package deploy holds the deployment files (compose, Kubernetes,
// Grafana, Prometheus); its test checks them against the code, since no
// Docker engine or cluster runs where the tests do.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/redlock-proxy/redlock-proxy/config"
	"github.com/redlock-proxy/redlock-proxy/metrics"
	"github.com/redlock-proxy/redlock-proxy/proxy"
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

// composePort is how the compose file publishes a proxy port: on
// 127.0.0.1 unless REDLOCK_BIND says otherwise.
var composePort = regexp.MustCompile(`^\$\{REDLOCK_BIND:-127\.0\.0\.1\}:(\d+):(\d+)$`)

// TestCompose: the compose file parses, its proxies mount a configuration
// the proxy accepts at the image's path, whose masters are the compose
// services, publish the image's ports on loopback (REDLOCK_BIND
// overrides it), and get a stop grace period longer than the proxy's 10 s
// drain.
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
	text := read(t, "docker-compose.yaml")
	if err := yaml.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "REDLOCK_BIND=0.0.0.0") || !strings.Contains(string(read(t, "README.md")), "REDLOCK_BIND=0.0.0.0") {
		t.Error("the compose file and deploy/README.md do not say how to publish beyond loopback (REDLOCK_BIND=0.0.0.0)")
	}
	proxies := 0
	for name, svc := range doc.Services {
		if !strings.HasPrefix(name, "proxy") {
			if len(svc.Ports) > 0 {
				t.Errorf("%s publishes %v: only the proxies are reachable from the host", name, svc.Ports)
			}
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
			m := composePort.FindStringSubmatch(p)
			if m == nil {
				t.Errorf("%s publishes %q, want ${REDLOCK_BIND:-127.0.0.1}:<host port>:<port>", name, p)
				continue
			}
			published[m[2]] = true
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

// The Kubernetes objects, as far as the test reads them.
type (
	k8sObject struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   k8sMeta           `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		Spec       k8sSpec           `yaml:"spec"`
		file       string
	}
	k8sMeta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	k8sSpec struct {
		Replicas            *int           `yaml:"replicas"`
		ServiceName         string         `yaml:"serviceName"`
		PodManagementPolicy string         `yaml:"podManagementPolicy"`
		MinAvailable        int            `yaml:"minAvailable"`
		MaxUnavailable      int            `yaml:"maxUnavailable"`
		ClusterIP           string         `yaml:"clusterIP"`
		Selector            map[string]any `yaml:"selector"`
		Ports               []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
				Volumes                       []struct {
					Name      string `yaml:"name"`
					ConfigMap struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	}
	k8sContainer struct {
		Name           string   `yaml:"name"`
		Image          string   `yaml:"image"`
		Args           []string `yaml:"args"`
		ReadinessProbe k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  k8sProbe `yaml:"livenessProbe"`
		Ports          []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	k8sProbe struct {
		HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
		Exec    struct {
			Command []string `yaml:"command"`
		} `yaml:"exec"`
	}
)

// port is the container port named name, 0 if none.
func (c *k8sContainer) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// selects returns the labels o's selector matches on (a Service's
// selector, or a workload's or PDB's matchLabels).
func (o *k8sObject) selects() map[string]string {
	sel := o.Spec.Selector
	if ml, ok := sel["matchLabels"].(map[string]any); ok {
		sel = ml
	}
	out := map[string]string{}
	for k, v := range sel {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// matches reports whether labels carry every label of sel (a selector
// that is empty matches nothing here: every selector must say what).
func matches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// kustomization is deploy/kubernetes/kustomization.yaml.
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Labels     []any    `yaml:"labels"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
}

// render reads the kustomization and every object of its resources, with
// its images: entries applied, as kubectl apply -k would.
func render(t *testing.T) (kustomization, []*k8sObject) {
	t.Helper()
	var k kustomization
	dec := yaml.NewDecoder(bytes.NewReader(read(t, "kubernetes/kustomization.yaml")))
	dec.KnownFields(true)
	if err := dec.Decode(&k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	listed := map[string]bool{"kustomization.yaml": true}
	var objs []*k8sObject
	for _, f := range k.Resources {
		listed[f] = true
		dec := yaml.NewDecoder(bytes.NewReader(read(t, filepath.Join("kubernetes", f))))
		for {
			o := &k8sObject{file: f}
			err := dec.Decode(o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "" {
				t.Fatalf("%s: an object without a kind", f)
			}
			objs = append(objs, o)
		}
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not among kustomization.yaml's resources", f)
		}
	}
	for _, o := range objs {
		for i := range o.Spec.Template.Spec.Containers {
			c := &o.Spec.Template.Spec.Containers[i]
			for _, im := range k.Images {
				if c.Image == im.Name {
					c.Image = im.NewName + ":" + im.NewTag
				}
			}
		}
	}
	return k, objs
}

// apiVersions are the API versions the manifests must use, by kind.
var apiVersions = map[string]string{
	"ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1",
	"PodDisruptionBudget": "policy/v1",
}

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// imageRef is a pushed image: a registry host, a path and a tag.
	imageRef = regexp.MustCompile(`^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+:[A-Za-z0-9._-]+$`)
)

// TestKubernetes renders deploy/kubernetes as kustomize would and checks
// it: every file is a resource of the kustomization; each object's kind,
// API version and name are valid and unique; the masters are independent
// Redis servers (no replicaof), each reachable by a per-pod DNS name of a
// headless Service, and the ConfigMap's masters are exactly those names
// (its config.yaml loaded and validated by the config package); the proxy
// Deployment runs 2+ replicas of an image the kustomization sets to a
// pushed reference (deploy/README.md says how to build and push it), with
// probes on /readyz and /healthz on the metrics port, resource requests,
// the ConfigMap mounted where the image reads it, a grace period above the
// drain; Services and PDBs select the pods they are for.
func TestKubernetes(t *testing.T) {
	k, objs := render(t)
	byKind := map[string][]*k8sObject{}
	seen := map[string]bool{}
	for _, o := range objs {
		if want, ok := apiVersions[o.Kind]; !ok || o.APIVersion != want {
			t.Errorf("%s: %s %s has apiVersion %q, want %q", o.file, o.Kind, o.Metadata.Name, o.APIVersion, want)
		}
		if !dnsLabel.MatchString(o.Metadata.Name) {
			t.Errorf("%s: %s name %q is not a DNS label", o.file, o.Kind, o.Metadata.Name)
		}
		if seen[o.Kind+"/"+o.Metadata.Name] {
			t.Errorf("%s: %s %s defined twice", o.file, o.Kind, o.Metadata.Name)
		}
		seen[o.Kind+"/"+o.Metadata.Name] = true
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	find := func(kind, name string) *k8sObject {
		for _, o := range byKind[kind] {
			if o.Metadata.Name == name {
				return o
			}
		}
		t.Fatalf("no %s %s", kind, name)
		return nil
	}
	// Every Service, workload and PDB selects the pods of a workload.
	for _, kind := range []string{"Service", "PodDisruptionBudget", "Deployment", "StatefulSet"} {
		for _, o := range byKind[kind] {
			n := 0
			for _, w := range append(slices.Clone(byKind["Deployment"]), byKind["StatefulSet"]...) {
				if matches(o.selects(), w.Spec.Template.Metadata.Labels) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s %s selects the pods of %d workloads, want 1", kind, o.Metadata.Name, n)
			}
		}
	}

	// The masters: independent Redis servers with per-pod DNS names.
	var masters []string
	for _, sts := range byKind["StatefulSet"] {
		c := sts.Spec.Template.Spec.Containers[0]
		if !strings.HasPrefix(c.Image, "redis:") {
			continue
		}
		args := strings.Join(c.Args, " ")
		if strings.Contains(args, "replicaof") || strings.Contains(args, "slaveof") || strings.Contains(args, "cluster-enabled") {
			t.Errorf("StatefulSet %s: masters must be independent, args %q", sts.Metadata.Name, args)
		}
		if !strings.Contains(args, "--appendonly yes") {
			t.Errorf("StatefulSet %s: no persistence, args %q", sts.Metadata.Name, args)
		}
		if sts.Spec.PodManagementPolicy != "Parallel" {
			t.Errorf("StatefulSet %s: podManagementPolicy %q, want Parallel (one master down must not hold the others back)", sts.Metadata.Name, sts.Spec.PodManagementPolicy)
		}
		svc := find("Service", sts.Spec.ServiceName)
		if svc.Spec.ClusterIP != "None" {
			t.Errorf("Service %s: not headless (clusterIP %q): no per-pod DNS names", svc.Metadata.Name, svc.Spec.ClusterIP)
		}
		if !matches(svc.selects(), sts.Spec.Template.Metadata.Labels) || len(svc.Spec.Ports) != 1 ||
			c.port(svc.Spec.Ports[0].TargetPort) != 6379 || svc.Spec.Ports[0].Port != 6379 {
			t.Errorf("Service %s does not serve StatefulSet %s's redis port", svc.Metadata.Name, sts.Metadata.Name)
		}
		if sts.Spec.Replicas == nil {
			t.Fatalf("StatefulSet %s: no replicas", sts.Metadata.Name)
		}
		for i := range *sts.Spec.Replicas {
			masters = append(masters, fmt.Sprintf("%s-%d.%s:%d", sts.Metadata.Name, i, svc.Metadata.Name, svc.Spec.Ports[0].Port))
		}
		pdbOK := false
		for _, pdb := range byKind["PodDisruptionBudget"] {
			pdbOK = pdbOK || (matches(pdb.selects(), sts.Spec.Template.Metadata.Labels) && pdb.Spec.MaxUnavailable == 1)
		}
		if !pdbOK {
			t.Errorf("StatefulSet %s: no PodDisruptionBudget with maxUnavailable 1", sts.Metadata.Name)
		}
	}
	if len(masters) != 5 {
		t.Errorf("%d masters shipped (%v), want 5", len(masters), masters)
	}

	// The ConfigMap: a configuration the proxy loads, listing exactly the
	// masters.
	cm := find("ConfigMap", "redlock-proxy")
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	var listed []string
	for _, m := range cfg.Masters {
		listed = append(listed, m.Addr)
	}
	slices.Sort(listed)
	slices.Sort(masters)
	if !slices.Equal(listed, masters) {
		t.Errorf("the ConfigMap lists masters %v, the manifests ship %v", listed, masters)
	}

	// The proxy.
	dep := find("Deployment", "redlock-proxy")
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("Deployment redlock-proxy: replicas %v, want 2 or more", dep.Spec.Replicas)
	}
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g < 15 {
		t.Errorf("terminationGracePeriodSeconds %d, want at least 15", g)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if !imageRef.MatchString(c.Image) {
		t.Errorf("the proxy's image %q is not a pushed image reference (registry/path:tag); kustomization images: %+v", c.Image, k.Images)
	}
	readme := string(read(t, "README.md"))
	for _, want := range []string{"docker build -t " + c.Image, "docker push " + c.Image, "kustomize edit set image redlock-proxy="} {
		if !strings.Contains(readme, want) {
			t.Errorf("deploy/README.md does not say %q", want)
		}
	}
	for _, p := range []struct {
		probe k8sProbe
		path  string
	}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
		if p.probe.HTTPGet.Path != p.path || c.port(p.probe.HTTPGet.Port) != 9121 {
			t.Errorf("probe %+v, want %s on the metrics port 9121", p.probe.HTTPGet, p.path)
		}
	}
	if c.port("resp") != 6380 || c.port("metrics") != 9121 {
		t.Errorf("container ports %+v", c.Ports)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Error("no resource requests")
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath+"/config.yaml" != configPath || !strings.Contains(strings.Join(c.Args, " "), configPath) {
		t.Errorf("config mounted at %+v, args %v, the image reads %s", c.VolumeMounts, c.Args, configPath)
	}
	vols := dep.Spec.Template.Spec.Volumes
	if len(vols) != 1 || vols[0].Name != c.VolumeMounts[0].Name || vols[0].ConfigMap.Name != cm.Metadata.Name {
		t.Errorf("the mounted volume %+v is not the ConfigMap %s", vols, cm.Metadata.Name)
	}
	svc := find("Service", "redlock-proxy")
	ports := map[int]bool{}
	for _, p := range svc.Spec.Ports {
		if c.port(p.TargetPort) != p.Port {
			t.Errorf("Service redlock-proxy: port %d goes to %q", p.Port, p.TargetPort)
		}
		ports[p.Port] = true
	}
	if !ports[6380] || !ports[9121] || !matches(svc.selects(), dep.Spec.Template.Metadata.Labels) {
		t.Errorf("Service redlock-proxy: ports %v, selector %v", ports, svc.selects())
	}
	pdbOK := false
	for _, pdb := range byKind["PodDisruptionBudget"] {
		pdbOK = pdbOK || (matches(pdb.selects(), dep.Spec.Template.Metadata.Labels) && pdb.Spec.MinAvailable >= 1)
	}
	if !pdbOK {
		t.Error("no PodDisruptionBudget keeping a proxy replica")
	}
}

// exported returns every series' name and label values of a registry in
// which every metric has a series: name -> label -> values.
func exported(t *testing.T) map[string]map[string]map[string]bool {
	t.Helper()
	m := metrics.New(func() []quorum.NodeStatus {
		return []quorum.NodeStatus{{Addr: "m1", State: quorum.StateUp}}
	})
	// What main does with the command table, for two commands.
	m.InitCommands([]metrics.CommandLabels{
		{Name: "rlock", Results: proxy.ResultNull.Labels(), Errors: []string{"NOQUORUM"}},
		{Name: "runlock", Results: proxy.ResultZero.Labels(), Errors: []string{"NOQUORUM"}},
		{Name: "rextend", Results: proxy.ResultNull.Labels(), Errors: []string{"NOQUORUM"}},
	})
	m.Masters(5, 3)
	m.Waiting(func() int { return 0 })
	// Series that appear with their first event.
	m.Command("rlock", time.Millisecond, proxy.ResultGranted, "")
	m.MasterCall("m1", time.Millisecond, nil)
	m.MasterCall("m1", time.Millisecond, errors.New("down"))
	m.DropinScript("x")
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]map[string]bool{}
	for _, f := range fams {
		labels := map[string]map[string]bool{}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] == nil {
					labels[l.GetName()] = map[string]bool{}
				}
				labels[l.GetName()][l.GetValue()] = true
			}
		}
		out[f.GetName()] = labels
	}
	return out
}

var (
	// metricUse is a metric named in a query, with its label matchers.
	metricUse = regexp.MustCompile(`(redlock_proxy_[a-z_]+)(\{[^}]*\})?`)
	// exactMatcher is a label="value" matcher.
	exactMatcher = regexp.MustCompile(`([a-z_]+)\s*=\s*\\?"([^"\\]*)\\?"`)
)

// TestDashboardAndAlertsUseRealMetrics: the alert rules parse, each with a
// severity and a summary, the quorum rules read redlock_proxy_quorum (no
// number of masters written in), the AUTOEXTEND-lost alert exists; every
// redlock_proxy_* metric the rules and the Grafana dashboard name is one
// the proxy exports, and every label="value" they match on is a value
// one of its series has (from the start: counters are pre-initialised).
func TestDashboardAndAlertsUseRealMetrics(t *testing.T) {
	names := exported(t)
	dash := read(t, "grafana/redlock-proxy.json")
	var parsed struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &parsed); err != nil || len(parsed.Panels) == 0 {
		t.Fatalf("dashboard: %v", err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	alerts := read(t, "prometheus/alerts.yaml")
	dec := yaml.NewDecoder(bytes.NewReader(alerts))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil || len(rules.Groups) == 0 {
		t.Fatalf("alerts: %v %+v", err, rules)
	}
	exprs := map[string]string{} // where -> query
	for _, p := range parsed.Panels {
		for i, tg := range p.Targets {
			exprs[fmt.Sprintf("dashboard panel %q target %d", p.Title, i)] = tg.Expr
		}
	}
	alertNames := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || alertNames[r.Alert] {
				t.Errorf("alert %q: empty or defined twice", r.Alert)
			}
			alertNames[r.Alert] = true
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("alert %s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s: no summary", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if strings.HasPrefix(r.Alert, "RedlockQuorum") && (!strings.Contains(r.Expr, "redlock_proxy_quorum") || regexp.MustCompile(`[<>=]\s*\d`).MatchString(r.Expr)) {
				t.Errorf("alert %s compares with a number, not redlock_proxy_quorum: %s", r.Alert, r.Expr)
			}
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	for _, want := range []string{"RedlockQuorumLost", "RedlockQuorumAtRisk", "RedlockNoQuorumReplies", "RedlockAutoextendLost"} {
		if !alertNames[want] {
			t.Errorf("no alert %s", want)
		}
	}
	for where, expr := range exprs {
		if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
			t.Errorf("%s: unbalanced brackets: %s", where, expr)
		}
		uses := metricUse.FindAllStringSubmatch(expr, -1)
		if len(uses) == 0 {
			t.Errorf("%s names no metric: %s", where, expr)
		}
		for _, u := range uses {
			base := u[1]
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b := strings.TrimSuffix(base, suffix); b != base && names[b] != nil {
					base = b
				}
			}
			labels, ok := names[base]
			if !ok {
				t.Errorf("%s uses %s, which the proxy does not export", where, u[1])
				continue
			}
			for _, mt := range exactMatcher.FindAllStringSubmatch(u[2], -1) {
				if !labels[mt[1]][mt[2]] {
					t.Errorf("%s matches %s{%s=%q}, a series the proxy does not have", where, base, mt[1], mt[2])
				}
			}
		}
	}
}
