// Package metrics holds every Prometheus collector of redlock-proxy, on its
// own registry, and the HTTP handler serving /metrics, /healthz and
// /readyz. It observes the engine (quorum.Observer) and the RESP server
// (the proxy's Observer interface, satisfied structurally). Labels are
// never per resource, token or client.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// Metrics is the set of collectors.
type Metrics struct {
	reg *prometheus.Registry

	commands        *prometheus.CounterVec
	commandErrors   *prometheus.CounterVec
	commandDuration *prometheus.HistogramVec
	operations      *prometheus.CounterVec
	opDuration      *prometheus.HistogramVec
	masterRequests  *prometheus.CounterVec
	masterDuration  *prometheus.HistogramVec
	connections     prometheus.Gauge
	rejected        prometheus.Counter
	dropped         *prometheus.CounterVec
	authFailures    prometheus.Counter
	leaseEvents     *prometheus.CounterVec
	dropinScripts   *prometheus.CounterVec
	dropinRefused   *prometheus.CounterVec
	autoLeases      prometheus.Gauge

	perMaster sync.Map // addr -> *masterChildren, resolved once per master
}

// masterChildren are one master's metric series, looked up once instead of
// hashing the labels on every request.
type masterChildren struct {
	ok, failed prometheus.Counter
	duration   prometheus.Observer
}

var _ quorum.Observer = (*Metrics)(nil)

// New registers every collector on a new registry. status, if not nil,
// feeds the per-master gauges at scrape time.
func New(status func() []quorum.NodeStatus) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_commands_total",
		Help: "Commands answered, by command and result: granted (an acquire or extension answered a value, a release 1), not_granted (an acquire or extension answered null, a release 0), ok (a command that grants nothing answered) or error (any error reply; its code in redlock_proxy_command_errors_total).",
	}, []string{"command", "result"})
	m.commandErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_command_errors_total",
		Help: "Error replies, by command and RESP error code (NOQUORUM, ERR, NOPERM, NOAUTH, LOST, ...).",
	}, []string{"command", "code"})
	m.commandDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "redlock_proxy_command_duration_seconds",
		Help:    "Time from reading a command to writing its reply, WAIT included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
	}, []string{"command"})
	m.operations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_operations_total",
		Help: "Engine operations by op (" + strings.Join(engineOps(), ", ") + ") and outcome: ok, refused, no_quorum, canceled, error.",
	}, []string{"op", "outcome"})
	m.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "redlock_proxy_operation_duration_seconds",
		Help:    "Duration of engine operations, all tries of a WAIT included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
	}, []string{"op"})
	m.masterRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_master_requests_total",
		Help: "Requests to each master, by result (ok or error).",
	}, []string{"master", "result"})
	m.masterDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "redlock_proxy_master_request_duration_seconds",
		Help:    "Round-trip time of requests to each master.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 12),
	}, []string{"master"})
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "redlock_proxy_client_connections",
		Help: "Open client connections.",
	})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlock_proxy_rejected_connections_total",
		Help: "Connections refused because limits.max_clients was reached.",
	})
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_dropped_connections_total",
		Help: "Client connections the proxy closed, by reason: protocol_error (malformed or over limits.*), timeout (idle, a command trickling in, replies not read), tls_handshake or output_buffer (a subscriber over 32 MB of unread messages).",
	}, []string{"reason"})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlock_proxy_auth_failures_total",
		Help: "AUTH and HELLO ... AUTH attempts with a wrong user name or password.",
	})
	m.leaseEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_autoextend_events_total",
		Help: "AUTOEXTEND leases: extended (an extension reached a quorum), extend_failed (it did not; retried while the validity lasts), lost (the validity ended without one), released_on_disconnect (released because the connection closed).",
	}, []string{"event"})
	m.autoLeases = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "redlock_proxy_autoextend_leases",
		Help: "AUTOEXTEND leases the proxy keeps alive now.",
	})
	m.dropinScripts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_dropin_scripts_total",
		Help: "Drop-in mode: runs of lock scripts, by the operation each was recognised as (acquire, release, extend, check, semacquire, semrelease, semextend, forcerelease, hashacquire, hashextend, hashrelease).",
	}, []string{"script"})
	m.dropinRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_proxy_dropin_scripts_refused_total",
		Help: "Drop-in mode: EVAL and EVALSHA of scripts refused, by the operation each reads as (unknown if none) and holds (true when it named a lock a client took through this proxy, still valid, with the holder's value among its arguments: a library's extend or release that did not happen).",
	}, []string{"expected", "holds"})
	m.reg.MustRegister(m.commands, m.commandErrors, m.commandDuration, m.operations, m.opDuration,
		m.masterRequests, m.masterDuration, m.connections, m.rejected, m.dropped, m.authFailures,
		m.leaseEvents, m.autoLeases, m.dropinScripts, m.dropinRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoCollector())
	if status != nil {
		m.reg.MustRegister(&masterCollector{status: status})
	}
	// The series dashboards and alerts use exist from the start, at 0.
	for _, op := range engineOps() {
		for _, o := range []quorum.Outcome{quorum.OutcomeOK, quorum.OutcomeRefused, quorum.OutcomeNoQuorum, quorum.OutcomeCanceled, quorum.OutcomeError} {
			m.operations.WithLabelValues(op, string(o))
		}
	}
	for _, e := range []string{"extended", "extend_failed", "lost", "released_on_disconnect"} {
		m.leaseEvents.WithLabelValues(e)
	}
	for _, r := range []string{"protocol_error", "timeout", "tls_handshake", "output_buffer"} {
		m.dropped.WithLabelValues(r)
	}
	return m
}

// engineOps are the engine's operation names (quorum.Observer's op),
// whose series exist from the start: quorum's own list.
func engineOps() []string { return quorum.Operations() }

// CommandLabels are one command's label values, for InitCommands.
type CommandLabels struct {
	// Name is the command's name, as in COMMAND.
	Name string
	// Results are the result label values it can report.
	Results []string
	// Errors are the error codes whose series it starts with (NOQUORUM
	// for a command that asks the masters).
	Errors []string
}

// InitCommands creates the command series of cmds at 0, so that a rate
// or an alert over them has a series before the first call. main passes
// the command table (proxy.Command's Result.Labels).
func (m *Metrics) InitCommands(cmds []CommandLabels) {
	for _, c := range cmds {
		for _, r := range c.Results {
			m.commands.WithLabelValues(c.Name, r)
		}
		for _, code := range c.Errors {
			m.commandErrors.WithLabelValues(c.Name, code)
		}
	}
}

// Masters registers redlock_proxy_masters and redlock_proxy_quorum: the
// masters configured and the votes a grant needs. Alerts compare the
// masters up and voting with them.
func (m *Metrics) Masters(n, quorum int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "redlock_proxy_masters",
		Help: "Masters configured.",
	}, func() float64 { return float64(n) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "redlock_proxy_quorum",
		Help: "Masters whose votes a grant needs (the quorum).",
	}, func() float64 { return float64(quorum) }))
}

// Operation implements quorum.Observer.
func (m *Metrics) Operation(op string, outcome quorum.Outcome, d time.Duration) {
	m.operations.WithLabelValues(op, string(outcome)).Inc()
	m.opDuration.WithLabelValues(op).Observe(d.Seconds())
}

// MasterCall implements quorum.Observer.
func (m *Metrics) MasterCall(addr string, d time.Duration, err error) {
	v, ok := m.perMaster.Load(addr)
	if !ok {
		v, _ = m.perMaster.LoadOrStore(addr, &masterChildren{
			ok:       m.masterRequests.WithLabelValues(addr, "ok"),
			failed:   m.masterRequests.WithLabelValues(addr, "error"),
			duration: m.masterDuration.WithLabelValues(addr),
		})
	}
	c := v.(*masterChildren)
	if err != nil {
		c.failed.Inc()
	} else {
		c.ok.Inc()
	}
	c.duration.Observe(d.Seconds())
}

// Command implements the proxy's Observer.
func (m *Metrics) Command(name string, d time.Duration, result, errCode string) {
	m.commands.WithLabelValues(name, result).Inc()
	if errCode != "" {
		m.commandErrors.WithLabelValues(name, errCode).Inc()
	}
	m.commandDuration.WithLabelValues(name).Observe(d.Seconds())
}

// Connections implements the proxy's Observer.
func (m *Metrics) Connections(open int) { m.connections.Set(float64(open)) }

// Rejected implements the proxy's Observer.
func (m *Metrics) Rejected() { m.rejected.Inc() }

// Dropped implements the proxy's Observer.
func (m *Metrics) Dropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }

// LeaseEvent implements commands.LeaseObserver.
func (m *Metrics) LeaseEvent(event string) { m.leaseEvents.WithLabelValues(event).Inc() }

// Registry is the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Waiting registers redlock_proxy_blocked_clients, read from f: the
// clients waiting in a blocking command (WAIT) now.
func (m *Metrics) Waiting(f func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "redlock_proxy_blocked_clients",
		Help: "Clients waiting in a blocking command (a WAIT) now.",
	}, func() float64 { return float64(f()) }))
}

// GrantedTTL registers redlock_proxy_granted_ttl_max_seconds, read from
// f: the longest ttl granted or extended since the proxy started, what
// limits.max_ttl (and so the longest restart quarantine) could be
// lowered to.
func (m *Metrics) GrantedTTL(f func() time.Duration) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "redlock_proxy_granted_ttl_max_seconds",
		Help: "The longest ttl granted or extended since the proxy started (0 before the first grant): limits.max_ttl need not be above it.",
	}, func() float64 { return f().Seconds() }))
}

// DropinScript counts one run of a drop-in script.
func (m *Metrics) DropinScript(name string) { m.dropinScripts.WithLabelValues(name).Inc() }

// DropinRefused counts one refused drop-in script run.
func (m *Metrics) DropinRefused(expected string, holds bool) {
	m.dropinRefused.WithLabelValues(expected, strconv.FormatBool(holds)).Inc()
}

// AutoLeases implements commands.LeaseObserver.
func (m *Metrics) AutoLeases(delta int) { m.autoLeases.Add(float64(delta)) }

// AuthFailed implements the proxy's Observer.
func (m *Metrics) AuthFailed() { m.authFailures.Inc() }

// Handler serves /metrics, /healthz (the process answers) and /readyz
// (ready() is true: a quorum of masters is up, see quorum.Status.Ready).
func (m *Metrics) Handler(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			http.Error(w, "not ready: fewer than a quorum of masters up (a cluster master counts with every slot on a shard that is up and voting)", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// masterCollector reports each master's state and latency at scrape time.
type masterCollector struct {
	status func() []quorum.NodeStatus
}

var (
	masterUpDesc = prometheus.NewDesc("redlock_proxy_master_up",
		"1 if the master answered its last request (quarantined or not), else 0.", []string{"master"}, nil)
	masterLatencyDesc = prometheus.NewDesc("redlock_proxy_master_latency_seconds",
		"Round-trip time of the master's last successful request.", []string{"master"}, nil)
	masterQuarantinedDesc = prometheus.NewDesc("redlock_proxy_master_quarantined",
		"1 while the master's vote does not count after a restart (quarantine, or waiting for its fence floor).", []string{"master"}, nil)
	masterQuarantineLeftDesc = prometheus.NewDesc("redlock_proxy_master_quarantine_remaining_seconds",
		"Time left in the master's restart quarantine.", []string{"master"}, nil)
	masterRestartsDesc = prometheus.NewDesc("redlock_proxy_master_restarts_total",
		"Restarts (run_id changes) of the master seen since the proxy started.", []string{"master"}, nil)
	shardUpDesc = prometheus.NewDesc("redlock_proxy_shard_up",
		"1 while the connection to the shard of a cluster master is up, else 0.", []string{"master", "shard"}, nil)
	shardQuarantinedDesc = prometheus.NewDesc("redlock_proxy_shard_quarantined",
		"1 while the shard's vote does not count after a restart or a failover (quarantine, or waiting for its fence floors).", []string{"master", "shard"}, nil)
	shardSlotsDesc = prometheus.NewDesc("redlock_proxy_shard_slots",
		"Hash slots the shard serves.", []string{"master", "shard"}, nil)
	shardRestartsDesc = prometheus.NewDesc("redlock_proxy_shard_restarts_total",
		"Restarts (run_id changes) of the shard seen since the proxy started.", []string{"master", "shard"}, nil)
	shardFailoversDesc = prometheus.NewDesc("redlock_proxy_shard_failovers_total",
		"Failovers seen since the proxy started: slots the shard took over while it was not a master.", []string{"master", "shard"}, nil)
)

// Describe implements prometheus.Collector.
func (c *masterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- masterUpDesc
	ch <- masterLatencyDesc
	ch <- masterQuarantinedDesc
	ch <- masterQuarantineLeftDesc
	ch <- masterRestartsDesc
	ch <- shardUpDesc
	ch <- shardQuarantinedDesc
	ch <- shardSlotsDesc
	ch <- shardRestartsDesc
	ch <- shardFailoversDesc
}

// Collect implements prometheus.Collector.
func (c *masterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.status() {
		up := 0.0
		if s.State != quorum.StateDown {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(masterUpDesc, prometheus.GaugeValue, up, s.Addr)
		ch <- prometheus.MustNewConstMetric(masterLatencyDesc, prometheus.GaugeValue, s.Latency.Seconds(), s.Addr)
		q := 0.0
		if s.State == quorum.StateQuarantined {
			q = 1
		}
		ch <- prometheus.MustNewConstMetric(masterQuarantinedDesc, prometheus.GaugeValue, q, s.Addr)
		ch <- prometheus.MustNewConstMetric(masterQuarantineLeftDesc, prometheus.GaugeValue, s.QuarantineLeft.Seconds(), s.Addr)
		ch <- prometheus.MustNewConstMetric(masterRestartsDesc, prometheus.CounterValue, float64(s.Restarts), s.Addr)
		for _, sh := range s.Shards {
			ch <- prometheus.MustNewConstMetric(shardUpDesc, prometheus.GaugeValue, b2f(sh.Up), s.Addr, sh.Addr)
			ch <- prometheus.MustNewConstMetric(shardQuarantinedDesc, prometheus.GaugeValue, b2f(!sh.Voting), s.Addr, sh.Addr)
			ch <- prometheus.MustNewConstMetric(shardSlotsDesc, prometheus.GaugeValue, float64(sh.Slots), s.Addr, sh.Addr)
			ch <- prometheus.MustNewConstMetric(shardRestartsDesc, prometheus.CounterValue, float64(sh.Restarts), s.Addr, sh.Addr)
			ch <- prometheus.MustNewConstMetric(shardFailoversDesc, prometheus.CounterValue, float64(sh.Failovers), s.Addr, sh.Addr)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
