package trigger

import (
	"crypto/tls"
	"fmt"
)

// LoadTLS returns a server TLS configuration from PEM cert and key files, or nil (plain
// text) when both are empty. Exactly one of them set is an error.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, fmt.Errorf("TLS needs both a certificate file and a key file (got cert %q, key %q)", certFile, keyFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
