package natsserver

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestServer(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		// connect returns extra client options; wantErr says the connection must fail.
		connect []nats.Option
		wantErr bool
	}{
		{name: "no auth"},
		{name: "token", opts: Options{Token: "s3cret"}},
		{name: "user password", opts: Options{User: "argo", Password: "pw"}},
		{name: "wrong token refused", opts: Options{Token: "s3cret"}, connect: []nats.Option{nats.Token("wrong")}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Start(ctx, tc.opts)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer s.Stop()
			nc, err := s.Connect(tc.connect...)
			if tc.wantErr {
				if err == nil {
					nc.Close()
					t.Fatal("connect succeeded, want an auth error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer nc.Close()
			if !nc.TLSRequired() {
				t.Error("server does not require TLS")
			}
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatalf("jetstream: %v", err)
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}}); err != nil {
				t.Fatalf("create stream: %v", err)
			}
			if _, err := js.Publish(ctx, "default.es.ev", []byte(`{}`)); err != nil {
				t.Fatalf("publish: %v", err)
			}
		})
	}
}

// TestPlainTCPRefused checks the trap Argo Events depends on: the server speaks TLS only.
func TestPlainTCPRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer s.Stop()
	// Argo's client: TLS without verification.
	nc, err := nats.Connect(s.ClientURL(), nats.Secure(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // mirrors Argo Events
	if err != nil {
		t.Fatalf("insecure TLS connect (as Argo Events does): %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(s.ClientURL(), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("plain TCP connect succeeded; the server must require TLS")
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{name: "token and user", opts: Options{Token: "t", User: "u", Password: "p"}},
		{name: "user without password", opts: Options{User: "u"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Start(context.Background(), tc.opts); err == nil {
				s.Stop()
				t.Fatal("Start succeeded, want an error")
			}
		})
	}
}
