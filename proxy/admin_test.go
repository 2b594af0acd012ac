package proxy

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAdminFlag: a FlagAdmin command runs only for an admin user: a named
// user with Admin, or the default user with DefaultAdmin (every client
// when authentication is off). Others are answered Redis's ACL NOPERM
// before the handler runs.
func TestAdminFlag(t *testing.T) {
	var ran atomic.Int64
	admin := func() []*Command {
		return []*Command{{Name: "adm", Arity: 1, Flags: FlagAdmin, Handler: func(context.Context, *Session, [][]byte) (any, error) {
			ran.Add(1)
			return OK, nil
		}}}
	}
	users := []User{
		{Name: "ops", PasswordSHA256: sha256.Sum256([]byte("opw")), Resources: []string{"*"}, Admin: true},
		{Name: "app", PasswordSHA256: sha256.Sum256([]byte("apw")), Resources: []string{"*"}},
	}
	openOff := newTestServer(t, Options{Commands: admin()})
	openOn := newTestServer(t, Options{Commands: admin(), Auth: Auth{DefaultAdmin: true}})
	named := newTestServer(t, Options{Commands: admin(), Auth: Auth{Password: "s3cret", Users: users}})
	passOn := newTestServer(t, Options{Commands: admin(), Auth: Auth{Password: "s3cret", DefaultAdmin: true}})
	const ok = "+OK\r\n"
	tests := []struct {
		name string
		ts   *testServer
		cmds []string
		want []string
	}{
		{"auth off, admin off", openOff, []string{"ADM"}, []string{"-NOPERM User default has no permissions to run the 'adm' command\r\n"}},
		{"auth off, admin on", openOn, []string{"ADM"}, []string{ok}},
		{"not authenticated", named, []string{"ADM"}, []string{noauth}},
		{"admin user", named, []string{"AUTH ops opw", "ADM"}, []string{ok, ok}},
		{"other user", named, []string{"AUTH app apw", "ADM"}, []string{ok, "-NOPERM User app has no permissions to run the 'adm' command\r\n"}},
		{"default user, admin off", named, []string{"AUTH s3cret", "ADM"}, []string{ok, "-NOPERM User default has no permissions to run the 'adm' command\r\n"}},
		{"default user, admin on", passOn, []string{"AUTH s3cret", "ADM"}, []string{ok, ok}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ran.Load()
			got := converse(t, tt.ts.addr, tt.cmds...)
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Fatalf("reply %d to %q: got %q, want %q", i, tt.cmds[i], got[i], tt.want[i])
				}
			}
			want := int64(0)
			if strings.HasPrefix(tt.want[len(tt.want)-1], "+OK") {
				want = 1
			}
			if n := ran.Load() - before; n != want {
				t.Fatalf("handler ran %d times, want %d", n, want)
			}
		})
	}
}
