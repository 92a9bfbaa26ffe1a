package flux

import (
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"strings"
)

// GitServer serves the Git repositories under one folder over Git's smart HTTP protocol
// on loopback, read-only: `git http-backend` behind Go's CGI handler. Flux's
// source-controller accepts only http(s) and ssh URLs, and go-git speaks only the smart
// protocol (no dumb HTTP, no file://).
type GitServer struct {
	root string
	ln   net.Listener
	srv  *http.Server
}

// ServeGit starts a GitServer for the repositories under root (a repository in root/NAME
// is at URL(NAME)). Close stops it.
func ServeGit(root string) (*GitServer, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"}}
	s := &GitServer{root: root, ln: ln, srv: &http.Server{Handler: readOnly(h)}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// readOnly refuses pushes: only the fetch side of the protocol is served.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack" {
			http.Error(w, "read-only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// URL is the clone URL of the repository in root/name.
func (s *GitServer) URL(name string) string { return "http://" + s.ln.Addr().String() + "/" + name }

// Close stops the server.
func (s *GitServer) Close() error {
	if err := s.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
