package dispatch

import (
	"errors"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// DefaultClusterName is the name of the cluster the service runs in, as the shipped
// EventSource sets it in its metadata (metadata.cluster: in-cluster).
const DefaultClusterName = "in-cluster"

// Clusters resolves a cluster name to the Attacher serving it. The empty name is the
// default cluster. An unknown name is a *core.FieldError (core.ErrInvalid) for field
// "cluster".
type Clusters interface {
	Attacher(name string) (*core.Attacher, error)
}

// SingleCluster is a Clusters of exactly one cluster, reachable as "" and as Name.
type SingleCluster struct {
	name string
	a    *core.Attacher
}

// NewSingleCluster returns a Clusters serving a under name (DefaultClusterName when
// empty). It returns an error if a is nil.
func NewSingleCluster(name string, a *core.Attacher) (*SingleCluster, error) {
	if a == nil {
		return nil, errors.New("dispatch: nil Attacher")
	}
	if name == "" {
		name = DefaultClusterName
	}
	return &SingleCluster{name: name, a: a}, nil
}

// Name returns the cluster's name.
func (s *SingleCluster) Name() string { return s.name }

// Attacher implements Clusters.
func (s *SingleCluster) Attacher(name string) (*core.Attacher, error) {
	if name == "" || name == s.name {
		return s.a, nil
	}
	return nil, core.Invalidf("cluster", "unknown cluster %q (this service serves %q)", core.Clip(name), s.name)
}
