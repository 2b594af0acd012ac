package luashape

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// Scripts in the shape of a read-write lock kept in a sorted set (our own
// paraphrase of Symfony Lock's RedisStore, 5.2 onwards: KEYS[1] the lock,
// ARGV[1] the client's clock in seconds, ARGV[2] the token, ARGV[3] the
// ttl in ms; members scored by expiry, "__write__" present while the one
// token holds it exclusively).
// The scripts of a read-write lock kept in a sorted set, in the shape of
// Symfony Lock's RedisStore (5.2 onwards), in testdata/zlock: KEYS[1] the
// lock, ARGV[1] the client's clock in seconds, ARGV[2] the token, ARGV[3]
// the ttl in ms; members scored by expiry, "__write__" present while the
// one token holds it exclusively. tests/dropin_test.go runs them too.
func zlockScript(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "zlock", name+".lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeRW is a read-write lock of the fake quorum.
type fakeRW struct {
	writer  string
	wexp    time.Time
	readers map[string]time.Time
}

func (f *fakeOps) rwl(key string) *fakeRW {
	if f.rw == nil {
		f.rw = map[string]*fakeRW{}
	}
	l := f.rw[key]
	if l == nil {
		l = &fakeRW{readers: map[string]time.Time{}}
		f.rw[key] = l
	}
	now := time.Now()
	if l.writer != "" && !now.Before(l.wexp) {
		l.writer = ""
	}
	for r, exp := range l.readers {
		if !now.Before(exp) {
			delete(l.readers, r)
		}
	}
	return l
}

func (f *fakeOps) RWState(_ context.Context, key, token string) (string, bool, bool, time.Duration, error) {
	l := f.rwl(key)
	_, reads := l.readers[token]
	others := len(l.readers) > 0 && !(reads && len(l.readers) == 1)
	ttl := time.Duration(0)
	if l.writer != "" {
		ttl = time.Until(l.wexp)
	}
	for _, exp := range l.readers {
		ttl = max(ttl, time.Until(exp))
	}
	return l.writer, reads, others, ttl, nil
}

func (f *fakeOps) WriteAcquire(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	f.calls = append(f.calls, "wacquire")
	l := f.rwl(key)
	if (l.writer != "" && l.writer != token) || len(l.readers) > 0 {
		return false, nil
	}
	l.writer, l.wexp = token, time.Now().Add(ttl)
	return true, nil
}

func (f *fakeOps) WriteRelease(_ context.Context, key, token string) (bool, error) {
	f.calls = append(f.calls, "wrelease")
	l := f.rwl(key)
	if l.writer != token {
		return false, nil
	}
	l.writer = ""
	return true, nil
}

func (f *fakeOps) WriteExtend(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	f.calls = append(f.calls, "wextend")
	l := f.rwl(key)
	if l.writer != token {
		return false, nil
	}
	l.wexp = time.Now().Add(ttl)
	return true, nil
}

func (f *fakeOps) ReadAcquire(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	f.calls = append(f.calls, "racquire")
	l := f.rwl(key)
	if l.writer != "" && l.writer != token {
		return false, nil
	}
	l.readers[token] = time.Now().Add(ttl)
	return true, nil
}

func (f *fakeOps) ReadRelease(_ context.Context, key, token string) (bool, error) {
	f.calls = append(f.calls, "rrelease")
	l := f.rwl(key)
	_, ok := l.readers[token]
	delete(l.readers, token)
	return ok, nil
}

func (f *fakeOps) ReadExtend(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	f.calls = append(f.calls, "rextend")
	l := f.rwl(key)
	if _, ok := l.readers[token]; !ok {
		return false, nil
	}
	l.readers[token] = time.Now().Add(ttl)
	return true, nil
}

// zstateOf reads a sorted-set lock on a real Redis as token sees it.
func zstateOf(t *testing.T, rc *respConn, key, token string) zstate {
	t.Helper()
	ms, _ := rc.do(t, "ZRANGE", key, "0", "-1").([]any)
	var tok, w, oth bool
	for _, m := range ms {
		switch m {
		case token:
			tok = true
		case "__write__":
			w = true
		default:
			oth = true
		}
	}
	switch {
	case !tok && !w && !oth:
		return zFree
	case tok && w && !oth:
		return zWrite
	case tok && !oth:
		return zRead
	case tok:
		return zReadShared
	case w:
		return zOtherWrite
	}
	return zOtherRead
}

// TestZLock runs each script of the sorted-set lock on one real Redis and
// through its shape over the fake quorum, from each of the six states,
// and compares the replies and the states they leave; the promotion of a
// read lock is refused, and nothing else is.
func TestZLock(t *testing.T) {
	srv := redistest.Start(t)
	rc := dialRESP(t, srv.Addr)
	const token = "dGhlLXRva2Vu"
	cases := []struct {
		name string
		src  string
		argv []string
	}{
		{"write", zlockScript(t, "write"), []string{"1700000000.5", token, "30000"}},
		{"read", zlockScript(t, "read"), []string{"1700000000.5", token, "30000"}},
		{"refresh", zlockScript(t, "refresh"), []string{"1700000000.5", token, "20000"}},
		{"release", zlockScript(t, "release"), []string{token}},
		{"exists", zlockScript(t, "exists"), []string{"1700000000.5", token}},
	}
	for _, tc := range cases {
		s, err := Recognise([]byte(tc.src))
		if err != nil {
			t.Fatalf("%s: not recognised: %v", tc.name, err)
		}
		if s.Kind != ZLock {
			t.Fatalf("%s: shape %v, want %s", tc.name, s, ZLock)
		}
		for st := zFree; st < zInvalid; st++ {
			t.Run(fmt.Sprintf("%s/%s", tc.name, strings.ReplaceAll(st.String(), " ", "-")), func(t *testing.T) {
				rc.do(t, "FLUSHALL")
				fake := newFake()
				exp := strconv.FormatInt(time.Now().UnixMilli()+10000, 10)
				add := func(members ...string) {
					for _, m := range members {
						rc.do(t, "ZADD", "lk", exp, m)
					}
					rc.do(t, "PEXPIREAT", "lk", exp)
				}
				l := fake.rwl("lk")
				soon := time.Now().Add(10 * time.Second)
				switch st {
				case zWrite:
					add(token, "__write__")
					l.writer, l.wexp = token, soon
				case zRead:
					add(token)
					l.readers[token] = soon
				case zReadShared:
					add(token, "other")
					l.readers[token], l.readers["other"] = soon, soon
				case zOtherWrite:
					add("other", "__write__")
					l.writer, l.wexp = "other", soon
				case zOtherRead:
					add("other")
					l.readers["other"] = soon
				}
				args := append([]string{"EVAL", tc.src, "1", "lk"}, tc.argv...)
				want := rc.do(t, args...)
				wantSt := zstateOf(t, rc, "lk", token)
				got, err := s.Run(context.Background(), fake, []string{"lk"}, tc.argv)
				if tc.name == "write" && st == zRead {
					// the promotion: one Redis makes it, the proxy refuses it
					if want != int64(1) || wantSt != zWrite {
						t.Fatalf("one Redis: %v, %s", want, wantSt)
					}
					if err == nil || !strings.Contains(err.Error(), "read lock into a write lock") {
						t.Fatalf("got %v, %v; want the promotion refused", got, err)
					}
					if len(fake.calls) != 0 {
						t.Fatalf("quorum calls %v", fake.calls)
					}
					return
				}
				if err != nil {
					t.Fatalf("Run: %v (one Redis: %v)", err, want)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("reply %v, one Redis %v", got, want)
				}
				w, reads, others, _, _ := fake.RWState(context.Background(), "lk", token)
				gotSt := rwState(token, w, reads, others)
				if gotSt != wantSt {
					t.Fatalf("quorum left %s (calls %v); one Redis %s", gotSt, fake.calls, wantSt)
				}
				if wantSt == zWrite && tc.name == "read" {
					t.Fatal("a read left a writer")
				}
				if st == zOtherWrite || st == zOtherRead && tc.name != "read" {
					if len(slices.DeleteFunc(fake.calls, func(c string) bool { return c == "" })) != 0 {
						t.Fatalf("quorum calls %v from a state the script does not change", fake.calls)
					}
				}
			})
		}
	}
}

// TestEphemeral: a script that writes only what expires within a
// millisecond (Symfony Lock's probe of TIME) is answered without the
// quorum; one that keeps its write longer is not ephemeral.
func TestEphemeral(t *testing.T) {
	s, err := Recognise([]byte(zlockScript(t, "probe")))
	if err != nil || s.Kind != Ephemeral {
		t.Fatalf("probe: %v, %v", s, err)
	}
	fake := newFake()
	got, err := s.Run(context.Background(), fake, []string{"symfony_check_support_time"}, nil)
	if err != nil || got != int64(1) || len(fake.calls) != 0 || len(fake.kv) != 0 {
		t.Fatalf("Run: %v, %v, calls %v", got, err, fake.calls)
	}
	for _, src := range []string{
		`redis.call('SET', KEYS[1], '1', 'PX', 2) return 1`,
		`local old = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '1', 'PX', 1) return old`,
		`redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) return 1`,
	} {
		if s, err := Recognise([]byte(src)); err == nil && s.Kind == Ephemeral {
			t.Errorf("%s: recognised as ephemeral", src)
		}
	}
}
