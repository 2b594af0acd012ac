package metrics

import (
	"testing"
	"time"
)

// series returns every series of the registry as "name{label=value,...}"
// -> value (counters and gauges).
func series(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := f.GetName() + "{"
			for i, l := range mt.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			key += "}"
			switch f.GetType().String() {
			case "COUNTER":
				out[key] = mt.GetCounter().GetValue()
			case "GAUGE":
				out[key] = mt.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestCommandResults: granted, not_granted and error are separate
// results of commands_total; an error's code goes to command_errors_total.
func TestCommandResults(t *testing.T) {
	m := New(nil)
	m.Command("rlock", time.Millisecond, "granted", "")
	m.Command("rlock", time.Millisecond, "granted", "")
	m.Command("rlock", time.Millisecond, "not_granted", "")
	m.Command("rlock", time.Millisecond, "error", "NOQUORUM")
	m.Command("runlock", time.Millisecond, "not_granted", "")
	s := series(t, m)
	for k, want := range map[string]float64{
		"redlock_proxy_commands_total{command=rlock,result=granted}":       2,
		"redlock_proxy_commands_total{command=rlock,result=not_granted}":   1,
		"redlock_proxy_commands_total{command=rlock,result=error}":         1,
		"redlock_proxy_command_errors_total{code=NOQUORUM,command=rlock}":  1,
		"redlock_proxy_commands_total{command=runlock,result=not_granted}": 1,
	} {
		if got, ok := s[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := s["redlock_proxy_commands_total{command=rlock,result=ok}"]; ok {
		t.Error("an acquire has an ok result")
	}
}

// TestPreinitialised: the series that dashboards and alerts use exist at
// 0 before anything happened: every command's results (and NOQUORUM for
// those given it), AUTOEXTEND events, dropped-connection reasons, engine
// operations; redlock_proxy_masters and redlock_proxy_quorum are set.
func TestPreinitialised(t *testing.T) {
	m := New(nil)
	m.InitCommands([]CommandLabels{
		{Name: "rlock", Results: []string{"granted", "not_granted", "error"}, Errors: []string{"NOQUORUM"}},
		{Name: "ping", Results: []string{"ok", "error"}},
	})
	m.Masters(5, 3)
	s := series(t, m)
	for k, want := range map[string]float64{
		"redlock_proxy_commands_total{command=rlock,result=granted}":          0,
		"redlock_proxy_commands_total{command=rlock,result=not_granted}":      0,
		"redlock_proxy_commands_total{command=rlock,result=error}":            0,
		"redlock_proxy_command_errors_total{code=NOQUORUM,command=rlock}":     0,
		"redlock_proxy_commands_total{command=ping,result=ok}":                0,
		"redlock_proxy_commands_total{command=ping,result=error}":             0,
		"redlock_proxy_autoextend_events_total{event=lost}":                   0,
		"redlock_proxy_autoextend_events_total{event=extended}":               0,
		"redlock_proxy_autoextend_events_total{event=extend_failed}":          0,
		"redlock_proxy_autoextend_events_total{event=released_on_disconnect}": 0,
		"redlock_proxy_dropped_connections_total{reason=timeout}":             0,
		"redlock_proxy_operations_total{op=lock,outcome=no_quorum}":           0,
		"redlock_proxy_operations_total{op=sem_acquire,outcome=ok}":           0,
		"redlock_proxy_masters{}":                                             5,
		"redlock_proxy_quorum{}":                                              3,
		"redlock_proxy_autoextend_leases{}":                                   0,
		"redlock_proxy_rejected_connections_total{}":                          0,
	} {
		if got, ok := s[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := s["redlock_proxy_command_errors_total{code=NOQUORUM,command=ping}"]; ok {
		t.Error("NOQUORUM series for a command not given it")
	}
}
