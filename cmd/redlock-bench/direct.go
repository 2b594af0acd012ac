package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// directRelease deletes the lock key if it still holds the caller's token:
// the compare-and-delete every Redlock client runs.
const directRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

// directDriver is Redlock written directly on rueidis, as a Go service
// that wants no proxy would write it: one auto-pipelined rueidis client per
// master; an acquire sends SET key token NX PX ttl to every master at
// once, waits for every answer, and holds the lock when a quorum
// said OK within the validity (ttl - elapsed - drift); otherwise it
// deletes what it set. Release runs the compare-and-delete script on
// every master and succeeds with a quorum. It is the peer the proxy must
// beat: the same fan-out with the best Go client, and nothing in between.
func (e *env) directDriver() (driver, error) {
	var clients []rueidis.Client
	for _, a := range e.addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{a},
			DisableCache:      true,
			ForceSingleClient: true,
			DisableRetry:      true,
		})
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return driver{}, err
		}
		clients = append(clients, c)
	}
	release := rueidis.NewLuaScript(directRelease)
	q := len(clients)/2 + 1
	ttl := e.ttl
	drift := ttl/100 + 2*time.Millisecond
	type reply struct {
		ok  bool
		err error
	}
	// fan runs f on every master at once and calls count with each
	// answer. Like go-redsync it returns once every master answered (each
	// bounded by ctx): a release sent while an acquire's goroutine has not
	// yet issued its SET could overtake it and leave the key behind.
	fan := func(f func(c rueidis.Client) reply, count func(reply)) {
		ch := make(chan reply, len(clients))
		for _, c := range clients[1:] {
			go func() { ch <- f(c) }()
		}
		ch <- f(clients[0])
		for range clients {
			count(<-ch)
		}
	}
	unlock := func(ctx context.Context, key, token string) (int, []error) {
		yes := 0
		var errs []error
		fan(func(c rueidis.Client) reply {
			n, err := release.Exec(ctx, c, []string{key}, []string{token}).AsInt64()
			return reply{ok: n == 1, err: err}
		}, func(r reply) {
			if r.err != nil {
				errs = append(errs, r.err)
			} else if r.ok {
				yes++
			}
		})
		return yes, errs
	}
	return driver{
		name: "rueidis",
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			var b [16]byte
			rand.Read(b[:])
			token := hex.EncodeToString(b[:])
			start := time.Now()
			yes, answered := 0, 0
			var errs []error
			fan(func(c rueidis.Client) reply {
				err := c.Do(ctx, c.B().Set().Key(keys[0]).Value(token).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
				if rueidis.IsRedisNil(err) {
					return reply{}
				}
				return reply{ok: err == nil, err: err}
			}, func(r reply) {
				if r.err != nil {
					errs = append(errs, r.err)
				} else {
					answered++
					if r.ok {
						yes++
					}
				}
			})
			if yes >= q && ttl-time.Since(start)-drift > 0 {
				return token, true, nil
			}
			unlock(context.WithoutCancel(ctx), keys[0], token)
			if answered < q {
				return "", false, fmt.Errorf("no quorum: %w", errors.Join(errs...))
			}
			return "", false, nil
		},
		unlock: func(ctx context.Context, keys []string, token string) error {
			yes, errs := unlock(ctx, keys[0], token)
			if yes < q {
				return fmt.Errorf("released on %d masters: %w", yes, errors.Join(errs...))
			}
			return nil
		},
		close: func() {
			for _, c := range clients {
				c.Close()
			}
		},
	}, nil
}

// cpuTime is the CPU (user + system) process pid has used so far, from
// /proc/<pid>/stat; pid 0 is this process.
func cpuTime(pid int) time.Duration {
	p := "self"
	if pid != 0 {
		p = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields count from ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuSample is the CPU used so far by the proxy, this process (the load
// generator and, for the client-side drivers, the lock client itself) and
// every master.
// calls is the number of script calls (EVAL and EVALSHA) the masters ran,
// from INFO commandstats: the proxy's batches show as fewer calls. reads
// is how many times the masters read a client's socket (INFO stats,
// total_reads_processed): each a wake-up of the master with what one
// client sent meanwhile, which is most of what a request costs a master
// when few requests share a read.
//
// io and switches are the proxy's (and proxy B's) read and write system
// calls (/proc/<pid>/io: syscr + syscw) and its threads' context switches
// (voluntary and not): what a cycle costs it in calls into the kernel and
// in sleeps.
type cpuSample struct {
	proxy, proxyB, client, masters time.Duration
	calls, reads                   float64
	io, ioB, switches, switchesB   float64
}

// procCounts sums the named counters ("name: value" lines) of
// /proc/<pid>/<file>.
func procCounts(pid int, file string, names ...string) float64 {
	return countsIn("/proc/"+strconv.Itoa(pid)+"/"+file, names)
}

// switchCount is the context switches of every thread of process pid
// (each thread's /proc/<pid>/task/<tid>/status: /proc/<pid>/status counts
// the main thread's only).
func switchCount(pid int) float64 {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	var sum float64
	for _, t := range tasks {
		sum += countsIn(t, []string{"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"})
	}
	return sum
}

func countsIn(path string, names []string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var sum float64
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, ":")
		if ok && slices.Contains(names, name) {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			sum += n
		}
	}
	return sum
}

func (e *env) cpu() cpuSample {
	pid := e.proxy.Process.Pid
	s := cpuSample{proxy: cpuTime(pid), client: cpuTime(0),
		io: procCounts(pid, "io", "syscr", "syscw"), switches: switchCount(pid)}
	if e.proxyB != nil {
		pb := e.proxyB.Process.Pid
		s.proxyB = cpuTime(pb)
		s.ioB = procCounts(pb, "io", "syscr", "syscw")
		s.switchesB = switchCount(pb)
	}
	for i, m := range e.masters {
		s.masters += cpuTime(m.Process.Pid)
		info, err := e.direct[i].Info(context.Background(), "commandstats", "stats").Result()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "total_reads_processed:"); ok {
				n, _ := strconv.ParseFloat(v, 64)
				s.reads += n
				continue
			}
			name, rest, ok := strings.Cut(l, ":calls=")
			if !ok || (name != "cmdstat_eval" && name != "cmdstat_evalsha") {
				continue
			}
			c, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseFloat(c, 64)
			s.calls += n
		}
	}
	return s
}

// perK is the CPU per 1000 cycles between two samples.
func (s cpuSample) perK(before cpuSample, cycles float64) cpuSample {
	if cycles <= 0 {
		return cpuSample{}
	}
	f := func(a, b time.Duration) time.Duration { return time.Duration(float64(a-b) * 1000 / cycles) }
	per := func(a, b float64) float64 { return (a - b) / cycles }
	return cpuSample{proxy: f(s.proxy, before.proxy), proxyB: f(s.proxyB, before.proxyB), client: f(s.client, before.client), masters: f(s.masters, before.masters),
		calls: (s.calls - before.calls) * 1000 / cycles, reads: (s.reads - before.reads) * 1000 / cycles,
		io: per(s.io, before.io), ioB: per(s.ioB, before.ioB), switches: per(s.switches, before.switches), switchesB: per(s.switchesB, before.switchesB)}
}
