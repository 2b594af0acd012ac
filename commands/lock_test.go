package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

var testLimits = Limits{MaxTTL: time.Hour, MaxWait: 5 * time.Minute}

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

func TestParseLock(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		in      []string
		want    lockArgs
		wantErr string
	}{
		{[]string{"r", "1000"}, lockArgs{resource: "r", ttl: 1000 * ms}, ""},
		{[]string{"r", "3600000"}, lockArgs{resource: "r", ttl: time.Hour}, ""},
		{[]string{"r", "1", "WAIT", "0"}, lockArgs{resource: "r", ttl: ms}, ""},
		{[]string{"r", "1", "wait", "300000", "token", "t"}, lockArgs{resource: "r", ttl: ms, wait: 5 * time.Minute, token: "t"}, ""},
		{[]string{"r", "1", "TOKEN", strings.Repeat("x", 128), "WaIt", "5"}, lockArgs{resource: "r", ttl: ms, wait: 5 * ms, token: strings.Repeat("x", 128)}, ""},
		{[]string{"\x00bin\xff", "5"}, lockArgs{resource: "\x00bin\xff", ttl: 5 * ms}, ""},
		{[]string{"", "5"}, lockArgs{}, "ERR resource name must not be empty"},
		{[]string{"r", "0"}, lockArgs{}, "ERR invalid expire time in 'rlock' command"},
		{[]string{"r", "-1"}, lockArgs{}, "ERR invalid expire time in 'rlock' command"},
		{[]string{"r", "3600001"}, lockArgs{}, "ERR invalid expire time in 'rlock' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"r", "x"}, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"r", " 5"}, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"r", "+5"}, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"r", "05"}, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"r", "9223372036854775808"}, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"r", "5", "WAIT"}, lockArgs{}, "ERR syntax error"},
		{[]string{"r", "5", "WAIT", "-1"}, lockArgs{}, "ERR timeout is negative"},
		{[]string{"r", "5", "WAIT", "300001"}, lockArgs{}, "ERR timeout is out of range (limits.max_wait is 5m0s)"},
		{[]string{"r", "5", "WAIT", "1.5"}, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"r", "5", "TOKEN"}, lockArgs{}, "ERR syntax error"},
		{[]string{"r", "5", "TOKEN", ""}, lockArgs{}, "ERR token must be 1 to 128 bytes"},
		{[]string{"r", "5", "TOKEN", strings.Repeat("x", 129)}, lockArgs{}, "ERR token must be 1 to 128 bytes"},
		{[]string{"r", "5", "TOKEN", "a", "TOKEN", "b"}, lockArgs{}, "ERR syntax error"},
		{[]string{"r", "5", "PX"}, lockArgs{}, "ERR syntax error"},
		{[]string{"r", "5", "5"}, lockArgs{}, "ERR syntax error"},
	}
	for _, tc := range tests {
		got, err := parseLock("rlock", args(tc.in...), testLimits)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("parseLock(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseLock(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestMapError: every engine error a handler can return reads as its RESP
// error, also when wrapped, and an error the table does not know maps to
// nil (the proxy then answers a generic error and logs it).
func TestMapError(t *testing.T) {
	noQuorum := &quorum.QuorumError{Op: "lock", Got: 2, Need: 3, Total: 5, Errs: []error{context.DeadlineExceeded}}
	tests := []struct {
		name string
		err  error
		want string // "" for nil
	}{
		{"no quorum", noQuorum, "NOQUORUM 2 of 5 masters answered, 3 needed"},
		{"no quorum, wrapped", fmt.Errorf("lock r: %w", noQuorum), "NOQUORUM 2 of 5 masters answered, 3 needed"},
		// A master's timeout inside a QuorumError is a quorum failure, not a
		// shutdown: the QuorumError branch must come first.
		{"no quorum with a timed-out master", &quorum.QuorumError{Op: "unlock", Got: 0, Need: 2, Total: 3, Errs: []error{context.DeadlineExceeded, context.Canceled}}, "NOQUORUM 0 of 3 masters answered, 2 needed"},
		// A quorum answered and decided nothing: the message says how.
		{"a release's answers split", &quorum.QuorumError{Op: "unlock", Got: 3, Need: 3, Total: 5, Yes: 2, No: 1},
			"NOQUORUM 3 of 5 masters answered, 3 needed: 2 held it and 1 did not, 2 did not answer; 3 holding it decide it held, and 3 not holding it that it was not"},
		{"a release's resent answers", &quorum.QuorumError{Op: "unlock", Got: 2, Need: 3, Total: 5, Yes: 2, Unsure: 1},
			"NOQUORUM 2 of 5 masters answered, 3 needed: 2 held it and 0 did not, 1 found nothing when asked again (their first request may have released it) and 2 did not answer; 3 holding it decide it held, and 3 not holding it that it was not"},
		{"a semaphore's permits split", &quorum.QuorumError{Op: "semrelease", Got: 3, Need: 3, Total: 5, Yes: 3, Agree: 2},
			"NOQUORUM 3 of 5 masters answered, 3 needed: 3 held it but only 2 of them the same permits, 0 did not hold it, 2 did not answer; 3 agreeing decide it held"},
		{"semaphore limit", fmt.Errorf("acquire: %w", &quorum.LimitError{Name: "pool", Limit: 10}), "ERR semaphore 'pool' has limit 10"},
		{"latch count", &quorum.LatchCountError{Name: "l", Count: 3}, "ERR latch 'l' has count 3"},
		{"no latch", fmt.Errorf("down: %w", quorum.ErrNoLatch), "ERR no such latch"},
		{"not quarantined", fmt.Errorf("%w: m0", quorum.ErrNotQuarantined), "ERR master is not quarantined (RQUARANTINE LIST shows each master)"},
		{"no such master", fmt.Errorf("%w: \"x\"", quorum.ErrNoSuchMaster), "ERR no such master: give its index in masters (from 0) or its addr, as RQUARANTINE LIST shows them"},
		{"reserved resource", fmt.Errorf("lock: %w", quorum.ErrReservedResource), "ERR resource name is reserved"},
		{"bad request", fmt.Errorf("%w: no resources", quorum.ErrBadRequest), "ERR syntax error"},
		{"canceled", fmt.Errorf("wait: %w", context.Canceled), "ERR wait canceled: server shutting down"},
		{"deadline", context.DeadlineExceeded, "ERR wait canceled: server shutting down"},
		{"unknown", errors.New("something else"), ""},
		{"quarantined alone", quorum.ErrQuarantined, ""},
	}
	for _, tc := range tests {
		got := MapError(tc.err)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %v mapped to %q, want nil", tc.name, tc.err, got.Error())
		case tc.want != "" && (got == nil || got.Error() != tc.want):
			t.Errorf("%s: %v mapped to %v, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}

// FuzzParseLock: any argument list either parses into values inside the
// limits or fails with a RESP error; it never panics.
func FuzzParseLock(f *testing.F) {
	f.Add("r", "1000", "WAIT", "5", "TOKEN", "t")
	f.Add("", "0", "wait", "-1", "token", "")
	f.Add("r", "99999999999999999999", "X", "", "", "")
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g string) {
		for n := 0; n <= 6; n++ {
			in := []string{a, b, c, d, e, g}[:n]
			la, err := parseLock("rlock", args(in...), testLimits)
			if err != nil {
				var re *proxy.Error
				if !errors.As(err, &re) || re.Code != "ERR" || !utf8.ValidString(re.Msg) {
					t.Fatalf("parseLock(%q): non-RESP error %v", in, err)
				}
				continue
			}
			if la.resource == "" || la.ttl <= 0 || la.ttl > testLimits.MaxTTL || la.wait < 0 || la.wait > testLimits.MaxWait || len(la.token) > MaxTokenLen {
				t.Fatalf("parseLock(%q) = %+v: outside the limits", in, la)
			}
		}
	})
}

// FuzzUnlockExtendArgs: the positional readers used by RUNLOCK and REXTEND
// never panic and never accept an empty resource or an oversized token.
func FuzzUnlockExtendArgs(f *testing.F) {
	f.Add("r", "t", "1000")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, r, tok, ttlArg string) {
		a := proxy.NewArgs(args(r, tok, ttlArg))
		res, tk, err := resourceToken(a)
		if err != nil {
			return
		}
		d, err := ttl(a, "rextend", testLimits)
		if err != nil {
			return
		}
		if res == "" || len(tk) == 0 || len(tk) > MaxTokenLen || d <= 0 || d > testLimits.MaxTTL {
			t.Fatalf("accepted %q %q %q as %q %q %v", r, tok, ttlArg, res, tk, d)
		}
	})
}

func TestParseMultiLock(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		in        []string
		resources []string
		want      lockArgs
		wantErr   string
	}{
		{[]string{"1000", "1", "a"}, []string{"a"}, lockArgs{ttl: 1000 * ms}, ""},
		{[]string{"1000", "3", "c", "a", "c"}, []string{"c", "a", "c"}, lockArgs{ttl: 1000 * ms}, ""},
		{[]string{"5", "2", "a", "b", "token", "t", "WAIT", "7"}, []string{"a", "b"}, lockArgs{ttl: 5 * ms, wait: 7 * ms, token: "t"}, ""},
		{[]string{"5", "1", "WAIT", "7"}, []string{"WAIT"}, lockArgs{}, "ERR syntax error"}, // "7" is an option
		{[]string{"x", "1", "a"}, nil, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"0", "1", "a"}, nil, lockArgs{}, "ERR invalid expire time in 'rmultilock' command"},
		{[]string{"5", "x", "a"}, nil, lockArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"5", "0", "a"}, nil, lockArgs{}, "ERR numkeys should be greater than 0"},
		{[]string{"5", "-1", "a"}, nil, lockArgs{}, "ERR numkeys should be greater than 0"},
		{[]string{"5", "2", "a"}, nil, lockArgs{}, "ERR syntax error"},
		{[]string{"5", "1025", "a"}, nil, lockArgs{}, "ERR syntax error"},
		{[]string{"5", "1", "a", "b"}, nil, lockArgs{}, "ERR syntax error"},
		{[]string{"5", "2", "a", ""}, nil, lockArgs{}, "ERR resource name must not be empty"},
		{[]string{"5", "1", "a", "WAIT", "-1"}, nil, lockArgs{}, "ERR timeout is negative"},
		{[]string{"5", "1", "a", "TOKEN", ""}, nil, lockArgs{}, "ERR token must be 1 to 128 bytes"},
		{[]string{"5", "1", "a", "TOKEN", "a", "TOKEN", "b"}, nil, lockArgs{}, "ERR syntax error"},
	}
	for _, tc := range tests {
		got, err := parseMultiLock(args(tc.in...), testLimits)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("parseMultiLock(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got.resources, tc.resources) || got.lockArgs != tc.want {
			t.Errorf("parseMultiLock(%q) = %+v, %v; want %v %+v", tc.in, got, err, tc.resources, tc.want)
		}
	}
}

func TestMultiLockKeys(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{[]string{"rmultilock", "1000", "2", "a", "b", "WAIT", "5"}, []string{"a", "b"}},
		{[]string{"rmultilock", "1000", "1", "a", "b"}, []string{"a"}},
		{[]string{"rmultilock", "1000", "3", "a", "b"}, nil},
		{[]string{"rmultilock", "1000", "0", "a"}, nil},
		{[]string{"rmultilock", "1000", "x", "a"}, nil},
		{[]string{"rmultilock", "1000"}, nil},
	}
	for _, tc := range tests {
		var got []string
		for _, k := range multiLockKeys(args(tc.in...)) {
			got = append(got, string(k))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("multiLockKeys(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseSemAcquire(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		in      []string
		want    semArgs
		wantErr string
	}{
		{[]string{"api", "5", "1000"}, semArgs{name: "api", limit: 5, count: 1, ttl: 1000 * ms}, ""},
		{[]string{"api", "5", "1000", "count", "5", "WAIT", "7", "TOKEN", "t"}, semArgs{name: "api", limit: 5, count: 5, ttl: 1000 * ms, wait: 7 * ms, token: "t"}, ""},
		{[]string{"api", "1000", "1"}, semArgs{name: "api", limit: 1000, count: 1, ttl: ms}, ""},
		{[]string{"", "5", "1000"}, semArgs{}, "ERR semaphore name must not be empty"},
		{[]string{"api", "x", "1000"}, semArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"api", "0", "1000"}, semArgs{}, "ERR limit must be 1 to 1000"},
		{[]string{"api", "1001", "1000"}, semArgs{}, "ERR limit must be 1 to 1000"},
		{[]string{"api", "5", "0"}, semArgs{}, "ERR invalid expire time in 'rsemacquire' command"},
		{[]string{"api", "5", "1000", "COUNT"}, semArgs{}, "ERR syntax error"},
		{[]string{"api", "5", "1000", "COUNT", "0"}, semArgs{}, "ERR count must be 1 to the limit"},
		{[]string{"api", "5", "1000", "COUNT", "6"}, semArgs{}, "ERR count must be 1 to the limit"},
		{[]string{"api", "5", "1000", "COUNT", "x"}, semArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"api", "5", "1000", "COUNT", "1", "COUNT", "1"}, semArgs{}, "ERR syntax error"},
		{[]string{"api", "5", "1000", "WAIT", "-1"}, semArgs{}, "ERR timeout is negative"},
		{[]string{"api", "5", "1000", "TOKEN", ""}, semArgs{}, "ERR token must be 1 to 128 bytes"},
		{[]string{"api", "5", "1000", "NX"}, semArgs{}, "ERR syntax error"},
	}
	for _, tc := range tests {
		got, err := parseSemAcquire(args(tc.in...), testLimits)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("parseSemAcquire(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseSemAcquire(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestValidity: the reply-time check that every acquire handler runs
// (validity): a grant is replied only with at least a millisecond of
// validity left and its client still there; otherwise it is given back
// (abandon) and the reply is the not-granted one.
func TestValidity(t *testing.T) {
	live, gone := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	tests := []struct {
		name        string
		ctx         context.Context
		validity    time.Duration
		ago         time.Duration // how long before the check it was computed
		want        int64
		wantAbandon bool
	}{
		{"valid", live, 10 * time.Second, 0, 10000, false},
		{"lapsed while waiting to be written", live, time.Second, 2 * time.Second, 0, true},
		// 0.5 ms left: not even one whole millisecond to report.
		{"less than a millisecond left", live, 1500 * time.Microsecond, time.Millisecond, 0, true},
		{"client left", gone, 10 * time.Second, 0, 0, true},
	}
	for _, tc := range tests {
		l := &quorum.Lease{Token: "t", Resources: []string{"r"}, Validity: tc.validity, Decided: time.Now().Add(-tc.ago)}
		abandoned := 0
		v, ok := validity(tc.ctx, l, func(_ context.Context, got *quorum.Lease) {
			if got != l {
				t.Errorf("%s: abandoned another lease", tc.name)
			}
			abandoned++
		})
		if tc.wantAbandon {
			if ok || abandoned != 1 {
				t.Errorf("%s: replied %d (ok %v), abandoned %d times; want given back once", tc.name, v, ok, abandoned)
			}
			continue
		}
		// A few milliseconds may pass on a slow machine.
		if !ok || abandoned != 0 || v > tc.want || v < tc.want-1000 {
			t.Errorf("%s: %d (ok %v), abandoned %d times; want about %d", tc.name, v, ok, abandoned, tc.want)
		}
	}
}
