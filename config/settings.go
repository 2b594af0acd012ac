package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Setting is one configuration value by its YAML key, as Settings lists
// them.
type Setting struct {
	Key   string // e.g. limits.max_ttl, masters[0].addr
	Value string // secrets (passwords, their digests) are "(set)"; an empty string is "(empty)"
	zero  bool   // the field's zero value
}

// Settings lists every value of c by its YAML key, in the order of the
// struct, lists element by element. Passwords and password digests are
// never shown: a set one reads "(set)".
func (c *Config) Settings() []Setting {
	var out []Setting
	flatten(reflect.ValueOf(*c), "", &out)
	return out
}

// NonDefault returns the settings of c that differ from the defaults (as
// Default and Validate fill them in), for a start-up log line saying what
// was configured.
func (c *Config) NonDefault() []Setting {
	def := Default()
	_ = def.Validate() // fills in the derived defaults; no masters is an error here
	dv := map[string]string{}
	for _, s := range def.Settings() {
		dv[s.Key] = s.Value
	}
	var out []Setting
	for _, s := range c.Settings() {
		v, ok := dv[s.Key]
		if !ok && s.zero {
			continue // a field left empty where the defaults have none (a master's username)
		}
		if !ok || v != s.Value {
			out = append(out, s)
		}
	}
	return out
}

func flatten(v reflect.Value, path string, out *[]Setting) {
	key := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch {
	case v.Kind() == reflect.Pointer:
		if !v.IsNil() {
			flatten(v.Elem(), path, out)
		}
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if secret(name) {
				if !v.Field(i).IsZero() {
					*out = append(*out, Setting{Key: key(name), Value: "(set)"})
				}
				continue
			}
			flatten(v.Field(i), key(name), out)
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		*out = append(*out, Setting{Key: path, Value: fmt.Sprint(v.Interface()), zero: v.Len() == 0})
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			flatten(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		s := fmt.Sprint(v.Interface())
		if s == "" {
			s = "(empty)"
		}
		*out = append(*out, Setting{Key: path, Value: s, zero: v.IsZero()})
	}
}

// secret reports whether a key holds a secret that must never be logged.
func secret(key string) bool {
	return key == "password" || key == "password_sha256"
}
