package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strings"
)

// Auth configures client authentication, as Redis's requirepass and ACL
// users do. The zero value turns it off: every connection is the default
// user, allowed every resource.
type Auth struct {
	// Password, if not empty, is the default user's password (requirepass).
	// Without it there is no default user once Users are configured.
	Password string
	// Users are named users, each limited to resource patterns.
	Users []User
	// DefaultAdmin lets the default user run admin commands (FlagAdmin):
	// every client when authentication is off, a client that gave
	// Password otherwise. False by default.
	DefaultAdmin bool
}

// User is one named user.
type User struct {
	// Name is the user name given to AUTH and HELLO ... AUTH.
	Name string
	// PasswordSHA256 is the SHA-256 digest of the user's password; the
	// password itself is never kept.
	PasswordSHA256 [32]byte
	// Resources are the glob patterns (Redis's: * ? [...] \) of the
	// resources the user may lock. A command naming any other resource is
	// refused with NOPERM before anything is sent to the masters.
	Resources []string
	// Channels are the glob patterns of the pub/sub channels the user may
	// SUBSCRIBE to and PUBLISH on; nil means the Resources patterns (a
	// library's channel named after its lock key is allowed with the
	// lock). A PSUBSCRIBE pattern is allowed only if every channel it can
	// match is allowed (see patternWithin). Other channels answer NOPERM
	// before anything is subscribed or relayed.
	Channels []string
	// Admin lets the user run admin commands (FlagAdmin).
	Admin bool
}

// user is a user as sessions refer to it.
type user struct {
	name     string
	digest   [32]byte
	patterns []string // nil: every resource
	channels []string // nil: every channel
	admin    bool     // may run admin commands (FlagAdmin)
}

// tenant is the user's name if it is a tenant (limited to resource
// patterns, not an administrator), else "".
func (u *user) tenant() string {
	if u.admin || u.patterns == nil {
		return ""
	}
	return u.name
}

// allowsChannel reports whether the user may subscribe to or publish on
// channel.
func (u *user) allowsChannel(channel []byte) bool { return matchesAny(u.channels, channel) }

// allowsPattern reports whether the user may PSUBSCRIBE pattern: only if
// it lies within one of the user's channel patterns.
func (u *user) allowsPattern(pattern []byte) bool {
	if u.channels == nil {
		return true
	}
	for _, p := range u.channels {
		if patternWithin(string(pattern), p) {
			return true
		}
	}
	return false
}

// patternWithin reports whether every channel that glob pattern p matches
// is matched by the allowed pattern a, by a rule that is sound and
// simple: p is a itself (Redis's ACL allows a pattern subscription only
// so), or a is a literal prefix followed by one '*' and p begins with
// that prefix, literally (no special byte of p before the prefix ends).
// So billing:* allows billing:orders:* and billing:[ab]*, never b*, *
// or bil?ing:*.
func patternWithin(p, a string) bool {
	if p == a {
		return true
	}
	prefix, ok := strings.CutSuffix(a, "*")
	if !ok || strings.ContainsAny(prefix, `*?[\`) || !strings.HasPrefix(p, prefix) {
		return false
	}
	return true
}

// ErrNoPermChannel is the error for a channel outside the user's
// patterns, in Redis's wording.
var ErrNoPermChannel = &Error{Code: "NOPERM", Msg: "No permissions to access a channel"}

// allows reports whether the user may use resource.
func (u *user) allows(resource []byte) bool { return matchesAny(u.patterns, resource) }

// matchesAny reports whether s matches one of patterns; nil patterns
// match everything, an empty list nothing.
func matchesAny(patterns []string, s []byte) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if globMatch(p, s) {
			return true
		}
	}
	return false
}

// ErrNoPerm is the error for a resource outside the user's patterns.
var ErrNoPerm = &Error{Code: "NOPERM", Msg: "No permissions to access a key"}

var errWrongPass = &Error{Code: "WRONGPASS", Msg: "invalid username-password pair or user is disabled."}

// users is the server's table of users, built once.
type users struct {
	required bool             // authentication is required
	byName   map[string]*user // includes "default" when it exists
	open     *user            // the default user when authentication is off
}

func newUsers(a Auth) (*users, error) {
	u := &users{byName: map[string]*user{}}
	if a.Password == "" && len(a.Users) == 0 {
		u.open = &user{name: "default", admin: a.DefaultAdmin}
		return u, nil
	}
	u.required = true
	if a.Password != "" {
		u.byName["default"] = &user{name: "default", digest: sha256.Sum256([]byte(a.Password)), admin: a.DefaultAdmin}
	}
	for _, x := range a.Users {
		if x.Name == "" {
			return nil, errors.New("proxy: a user has no name")
		}
		if _, dup := u.byName[x.Name]; dup {
			return nil, errors.New("proxy: user " + x.Name + " is defined twice")
		}
		patterns := append([]string{}, x.Resources...) // never nil: no patterns allows nothing
		channels := patterns
		if x.Channels != nil {
			channels = append([]string{}, x.Channels...)
		}
		u.byName[x.Name] = &user{name: x.Name, digest: x.PasswordSHA256, patterns: patterns, channels: channels, admin: x.Admin}
	}
	return u, nil
}

// check returns the user whose name and password these are, or nil. Its
// time does not depend on how much of the password is right, nor on
// whether the user exists.
func (u *users) check(name, pass string) *user {
	got := sha256.Sum256([]byte(pass))
	x, ok := u.byName[name]
	want := [32]byte{}
	if ok {
		want = x.digest
	}
	if subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok {
		return x
	}
	return nil
}

// globMatch reports whether s matches the Redis glob pattern p: * any run,
// ? any byte, [abc] [a-z] [^a] classes, \ quotes the next byte.
func globMatch(p string, s []byte) bool {
	// Iterative matching with one backtrack point for the last '*', which
	// keeps it linear-ish and free of recursion on hostile patterns.
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				pi, si = pi+1, si+1
				continue
			case '[':
				if end, ok := matchClass(p, pi, s[si]); ok {
					pi, si = end, si+1
					continue
				}
			case '\\':
				if pi+1 < len(p) {
					if p[pi+1] == s[si] {
						pi, si = pi+2, si+1
						continue
					}
					break
				}
				fallthrough
			default:
				if c == s[si] {
					pi, si = pi+1, si+1
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the class starting at p[i] == '['. It
// returns the index after the class and whether c is in it.
func matchClass(p string, i int, c byte) (int, bool) {
	i++
	neg := i < len(p) && p[i] == '^'
	if neg {
		i++
	}
	match := false
	for i < len(p) && p[i] != ']' {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			match = match || p[i+1] == c
			i += 2
		case i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']':
			lo, hi := p[i], p[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (c >= lo && c <= hi)
			i += 3
		default:
			match = match || p[i] == c
			i++
		}
	}
	if i < len(p) {
		i++ // the ']'
	}
	return i, match != neg
}

// GlobMatch reports whether s matches the Redis glob pattern p, as KEYS,
// SCAN's MATCH and the users' resource patterns read it.
func GlobMatch(p string, s []byte) bool { return globMatch(p, s) }
