package argoevents

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// rebase replaces the scheme and host of raw with those of base.
func rebase(raw, base string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", raw, err)
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", base, err)
	}
	if b.Scheme == "" || b.Host == "" {
		return "", fmt.Errorf("base %q needs a scheme and a host", base)
	}
	u.Scheme, u.Host = b.Scheme, b.Host
	return u.String(), nil
}

// loopbackPort returns the port of a URL or host:port target when its host is a loopback
// address (127.0.0.0/8, ::1 or localhost), and false otherwise. Targets with a unix://
// scheme need no bridge.
func loopbackPort(target string) (int, bool) {
	host, port := "", ""
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		if u.Scheme == "unix" {
			return 0, false
		}
		host, port = u.Hostname(), u.Port()
		if port == "" {
			switch u.Scheme {
			case "http":
				port = "80"
			case "https":
				port = "443"
			case "nats":
				port = "4222"
			}
		}
	} else if h, p, err := net.SplitHostPort(target); err == nil {
		host, port = h, p
	}
	if host == "" || port == "" {
		return 0, false
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return 0, false
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return 0, false
	}
	return n, true
}
