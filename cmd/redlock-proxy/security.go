package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/redlock-proxy/redlock-proxy/config"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// serverTLS builds the RESP listener's TLS configuration; nil means plain
// TCP.
func serverTLS(t *config.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.MinVersion == "1.3" {
		c.MinVersion = tls.VersionTLS13
	}
	if t.ClientCAFile != "" {
		pool, err := loadPool(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.client_ca_file: %w", err)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// masterTLS builds the TLS configuration to one master; nil means plain
// TCP. key names the master's config key, for errors.
func masterTLS(t *config.MasterTLS, key string) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls.ca_file: %w", key, err)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls: %w", key, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", file)
	}
	return pool, nil
}

// authOptions maps auth: onto the proxy's options. Plain passwords are
// hashed here and not kept.
func authOptions(a config.Auth) proxy.Auth {
	out := proxy.Auth{Password: a.Password}
	for _, u := range a.Users {
		pu := proxy.User{Name: u.Name, Resources: u.Resources, Channels: u.Channels, Admin: u.Admin}
		if u.PasswordSHA256 != "" {
			b, _ := hex.DecodeString(u.PasswordSHA256) // validated: 64 hex digits
			copy(pu.PasswordSHA256[:], b)
		} else {
			pu.PasswordSHA256 = sha256.Sum256([]byte(u.Password))
		}
		out.Users = append(out.Users, pu)
	}
	return out
}
