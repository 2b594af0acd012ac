package luashape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeOps is a quorum of one: the lock operations with the semantics the
// engine gives them, over an in-memory store.
type fakeOps struct {
	kv    map[string]fakeKey
	holds map[string]int            // a re-entrant (hash) lock's holds, by key
	sems  map[string]map[string]int // name -> token -> permits
	pubs  []string
	calls []string
	rw    map[string]*fakeRW // read-write locks (zlock_test.go)
}

type fakeKey struct {
	val string
	exp time.Time
}

func newFake() *fakeOps {
	return &fakeOps{kv: map[string]fakeKey{}, holds: map[string]int{}, sems: map[string]map[string]int{}}
}

func (f *fakeOps) Now() time.Time { return time.Now() }

func (f *fakeOps) held(k string) (fakeKey, bool) {
	v, ok := f.kv[k]
	if ok && !time.Now().Before(v.exp) {
		delete(f.kv, k)
		ok = false
	}
	return v, ok
}

func (f *fakeOps) state(keys []string, value string) State {
	mine, absent := 0, 0
	for _, k := range keys {
		v, ok := f.held(k)
		switch {
		case !ok:
			absent++
		case v.val == value:
			mine++
		}
	}
	switch {
	case mine == len(keys):
		return Mine
	case absent == len(keys):
		return Absent
	}
	return Other
}

func (f *fakeOps) Acquire(_ context.Context, keys []string, value string, ttl time.Duration, reentrant bool) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("acquire %v %s %v %v", keys, value, ttl, reentrant))
	for _, k := range keys {
		if v, ok := f.held(k); ok && !(reentrant && v.val == value) {
			return false, nil
		}
	}
	for _, k := range keys {
		f.kv[k] = fakeKey{value, time.Now().Add(ttl)}
	}
	return true, nil
}

func (f *fakeOps) Release(_ context.Context, keys []string, value string) (State, error) {
	f.calls = append(f.calls, fmt.Sprintf("release %v %s", keys, value))
	st := f.state(keys, value)
	if st == Mine {
		for _, k := range keys {
			delete(f.kv, k)
		}
	}
	return st, nil
}

func (f *fakeOps) Extend(_ context.Context, keys []string, value string, ttl time.Duration) (State, error) {
	f.calls = append(f.calls, fmt.Sprintf("extend %v %s %v", keys, value, ttl))
	st := f.state(keys, value)
	if st == Mine {
		for _, k := range keys {
			f.kv[k] = fakeKey{value, time.Now().Add(ttl)}
		}
	}
	return st, nil
}

func (f *fakeOps) Get(_ context.Context, key string) (string, time.Duration, bool, error) {
	f.calls = append(f.calls, "get "+key)
	v, ok := f.held(key)
	if !ok {
		return "", 0, false, nil
	}
	return v.val, time.Until(v.exp), true, nil
}

func (f *fakeOps) SemAcquire(_ context.Context, name string, limit, count int, ttl time.Duration, token string) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("semacquire %s %d %d %v %s", name, limit, count, ttl, token))
	used := 0
	for _, n := range f.sems[name] {
		used += n
	}
	if used+count > limit {
		return false, nil
	}
	if f.sems[name] == nil {
		f.sems[name] = map[string]int{}
	}
	f.sems[name][token] = count // as ZADD of members already there: the check counted them
	return true, nil
}

func (f *fakeOps) SemRelease(_ context.Context, name, token string) (State, error) {
	f.calls = append(f.calls, fmt.Sprintf("semrelease %s %s", name, token))
	if _, ok := f.sems[name][token]; ok {
		delete(f.sems[name], token)
		return Mine, nil
	}
	return Absent, nil
}

func (f *fakeOps) SemExtend(_ context.Context, name, token string, ttl time.Duration) (State, error) {
	f.calls = append(f.calls, fmt.Sprintf("semextend %s %s %v", name, token, ttl))
	if _, ok := f.sems[name][token]; ok {
		return Mine, nil
	}
	return Absent, nil
}

func (f *fakeOps) Hold(_ context.Context, key, owner string, ttl time.Duration) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("hold %s %s %v", key, owner, ttl))
	v, ok := f.held(key)
	if ok && v.val != owner {
		return false, nil
	}
	if !ok {
		f.holds[key] = 0
	}
	f.holds[key]++
	f.kv[key] = fakeKey{owner, time.Now().Add(ttl)}
	return true, nil
}

func (f *fakeOps) Unhold(_ context.Context, key, owner string) (State, int, error) {
	f.calls = append(f.calls, fmt.Sprintf("unhold %s %s", key, owner))
	st := f.state([]string{key}, owner)
	if st != Mine {
		return st, 0, nil
	}
	f.holds[key]--
	if f.holds[key] <= 0 {
		delete(f.kv, key)
		delete(f.holds, key)
		return Mine, 0, nil
	}
	return Mine, f.holds[key], nil
}

func (f *fakeOps) HoldExtend(_ context.Context, key, owner string, ttl time.Duration) (State, error) {
	f.calls = append(f.calls, fmt.Sprintf("holdextend %s %s %v", key, owner, ttl))
	st := f.state([]string{key}, owner)
	if st == Mine {
		f.kv[key] = fakeKey{owner, time.Now().Add(ttl)}
	}
	return st, nil
}

func (f *fakeOps) Delete(_ context.Context, keys []string) ([]bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("delete %v", keys))
	out := make([]bool, len(keys))
	for i, k := range keys {
		_, out[i] = f.held(k)
		delete(f.kv, k)
		delete(f.holds, k)
	}
	return out, nil
}

func (f *fakeOps) Publish(_ context.Context, ch, msg string) error {
	f.pubs = append(f.pubs, ch+" "+msg)
	return nil
}

// respConn is a minimal RESP2 client that keeps the reply's type (a
// status is not a bulk string), to compare with Run's replies exactly.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(t testing.TB, addr string) *respConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &respConn{c: c, r: bufio.NewReader(c)}
}

func (rc *respConn) do(t testing.TB, args ...string) any {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	v, err := rc.read()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (rc *respConn) read() (any, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+':
		return Status(line[1:]), nil
	case '-':
		return ScriptError(line[1:]), nil
	case ':':
		n, err := strconv.ParseInt(line[1:], 10, 64)
		return n, err
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		out := []any{}
		for i := 0; i < n; i++ {
			v, err := rc.read()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("bad reply %q", line)
}
