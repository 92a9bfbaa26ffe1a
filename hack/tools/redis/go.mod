// Tools module: builds a small Redis server (miniredis, the in-memory Redis that
// Argo CD's own tests use, at the version argo-cd v3.6.1 requires) for the Argo CD
// components of internal/argocd's tests, which cannot run without Redis.
module github.com/configmap-attacher/configmap-attacher/hack/tools/redis

go 1.26.0

require github.com/alicebob/miniredis/v2 v2.39.0

require github.com/yuin/gopher-lua v1.1.1 // indirect
