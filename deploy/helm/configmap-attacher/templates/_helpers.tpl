{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "cma.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name when it already contains the chart name. */}}
{{- define "cma.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "cma.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cma.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cma.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cma.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: service
app.kubernetes.io/part-of: configmap-attacher
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "cma.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cma.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "cma.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The namespace served: flags.watch-namespace, else the release namespace with rbac.scope=namespace, else "" (all). */}}
{{- define "cma.watchNamespace" -}}
{{- $ns := index .Values.flags "watch-namespace" | default "" }}
{{- if and (not $ns) (eq .Values.rbac.scope "namespace") }}
{{- $ns = .Release.Namespace }}
{{- end }}
{{- $ns }}
{{- end }}

{{/* "true" when the replicas share the clusters (serve --fleet): fleet.enabled true, or "auto" with more than one replica. */}}
{{- define "cma.fleet" -}}
{{- $e := .Values.fleet.enabled }}
{{- if or (eq (toString $e) "true") (and (eq (toString $e) "auto") (gt (int .Values.replicaCount) 1)) }}true{{ end }}
{{- end }}

{{/* "true" when leader election is on: leaderElection.enabled true, or "auto" with more than one replica. */}}
{{- define "cma.leaderElection" -}}
{{- $e := .Values.leaderElection.enabled }}
{{- if or (eq (toString $e) "true") (and (eq (toString $e) "auto") (gt (int .Values.replicaCount) 1)) }}true{{ end }}
{{- end }}

{{/* topologySpreadConstraints: the value when it is a list; with null, over nodes and zones when replicaCount > 1. */}}
{{- define "cma.topologySpread" -}}
{{- $t := .Values.topologySpreadConstraints }}
{{- if kindIs "slice" $t }}
{{- with $t }}{{ toYaml . }}{{ end }}
{{- else if gt (int .Values.replicaCount) 1 }}
{{- range $key := list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
- maxSkew: 1
  topologyKey: {{ $key }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "cma.selectorLabels" $ | nindent 6 }}
  matchLabelKeys: [pod-template-hash]
{{- end }}
{{- end }}
{{- end }}

{{- define "cma.pdb" -}}
{{- $e := .Values.podDisruptionBudget.enabled }}
{{- if or (eq (toString $e) "true") (and (eq (toString $e) "auto") (gt (int .Values.replicaCount) 1)) }}true{{ end }}
{{- end }}

{{- define "cma.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "cma.fullname" .)) .Values.tls.existingSecret }}
{{- end }}

{{/* A flag value as the binary reads it: whole numbers without an exponent. */}}
{{- define "cma.flagValue" -}}
{{- if kindIs "float64" . }}
{{- if eq . (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else }}
{{- . }}
{{- end }}
{{- end }}

{{/* The arguments of `configmap-attacher serve`, in a fixed order (flags sorted by name). */}}
{{- define "cma.args" -}}
- serve
- "--grpc-addr=:{{ .Values.ports.grpc }}"
- "--http-addr=:{{ .Values.ports.http }}"
- "--metrics-addr=:{{ .Values.ports.metrics }}"
{{- if .Values.tls.enabled }}
- --tls-cert-file=/etc/configmap-attacher/tls/tls.crt
- --tls-key-file=/etc/configmap-attacher/tls/tls.key
{{- end }}
{{- if .Values.httpAuth.enabled }}
- --http-token-file=/etc/configmap-attacher/http-token/token
{{- end }}
{{- if .Values.eventBusAuth.existingSecret }}
- --eventbus-auth-file=/etc/configmap-attacher/eventbus-auth/auth.yaml
{{- end }}
{{- $watch := include "cma.watchNamespace" . }}
{{- range $k, $v := .Values.flags }}
{{- if eq $k "watch-namespace" }}
{{- if $watch }}
- "--watch-namespace={{ $watch }}"
{{- end }}
{{- else if kindIs "slice" $v }}
{{- range $v }}
- {{ printf "--%s=%s" $k (include "cma.flagValue" .) | quote }}
{{- end }}
{{- else if not (or (kindIs "invalid" $v) (eq (toString $v) "") (and (kindIs "bool" $v) (not $v))) }}
- {{ printf "--%s=%s" $k (include "cma.flagValue" $v) | quote }}
{{- end }}
{{- end }}
{{- if .Values.argocdClusters.enabled }}
- "--argocd-clusters={{ .Values.argocdClusters.namespace }}"
{{- end }}
{{- if include "cma.leaderElection" . }}
- "--leader-elect=true"
- "--leader-elect-namespace={{ .Release.Namespace }}"
{{- end }}
{{- if include "cma.fleet" . }}
- "--fleet=true"
- "--fleet-namespace={{ .Release.Namespace }}"
- "--fleet-shards={{ .Values.fleet.shards }}"
- "--fleet-addr=:{{ .Values.fleet.port }}"
- "--fleet-advertise=$(POD_IP):{{ .Values.fleet.port }}"
- "--fleet-identity=$(POD_NAME)"
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The Secret holding the HTTP bearer token: httpAuth.existingSecret, else "<fullname>-http-token" (created from httpAuth.token). */}}
{{- define "cma.httpTokenSecretName" -}}
{{- default (printf "%s-http-token" (include "cma.fullname" .)) .Values.httpAuth.existingSecret }}
{{- end }}

{{/* The key of that Secret the service reads. */}}
{{- define "cma.httpTokenKey" -}}
{{- if .Values.httpAuth.existingSecret }}{{ .Values.httpAuth.existingSecretKey | default "token" }}{{ else }}token{{ end }}
{{- end }}

{{/* The NetworkPolicyPeer of namespace ns and pod selector sel (a LabelSelector). */}}
{{- define "cma.peer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .ns | quote }}
  podSelector:
    {{- toYaml .sel | nindent 4 }}
{{- end }}

{{/* Checks the values and fails rendering with a message naming the value; renders nothing. */}}
{{- define "cma.validate" -}}
{{- $a := .Values.httpAuth }}
{{- if hasKey .Values.flags "http-token-file" }}
{{- fail "flags.http-token-file is set by the chart from httpAuth (httpAuth.existingSecret or httpAuth.token); remove it from flags" }}
{{- end }}
{{- if $a.enabled }}
{{- if and $a.existingSecret $a.token }}
{{- fail "httpAuth: set one of httpAuth.existingSecret and httpAuth.token, not both" }}
{{- end }}
{{- if not (or $a.existingSecret $a.token) }}
{{- fail (printf "httpAuth: the HTTP receiver requires a bearer token. Set httpAuth.existingSecret (a Secret in namespace %s holding the token under key %q) or httpAuth.token (the chart creates the Secret %s-http-token); or set httpAuth.enabled=false to serve HTTP without authentication (insecure: whoever reaches the http port can send events)" .Release.Namespace ($a.existingSecretKey | default "token") (include "cma.fullname" .)) }}
{{- end }}
{{- if $a.token }}
{{- $t := toString $a.token }}
{{- if regexMatch "\\s" $t }}
{{- fail "httpAuth.token must not contain white space (the service rejects it)" }}
{{- end }}
{{- if gt (len $t) 4096 }}
{{- fail "httpAuth.token is longer than 4096 bytes (the service rejects it)" }}
{{- end }}
{{- end }}
{{- if and $a.sensorNamespaces (not $a.token) }}
{{- fail "httpAuth.sensorNamespaces needs httpAuth.token: the chart reads no Secret at render time, so it cannot copy httpAuth.existingSecret; create that Secret in the Sensors' namespace yourself" }}
{{- end }}
{{- else if index .Values.flags "http-public-metrics" }}
{{- fail "flags.http-public-metrics needs httpAuth.enabled (without a token, everything is public already)" }}
{{- else if index .Values.flags "pprof" }}
{{- fail "flags.pprof needs httpAuth.enabled: the ops listener serves the profiles only behind the bearer token (or use flags.profiling-addr, a loopback listener)" }}
{{- end }}
{{- if hasKey .Values.flags "metrics-addr" }}
{{- fail "flags.metrics-addr is set by the chart from ports.metrics; remove it from flags" }}
{{- end }}
{{- if hasKey .Values.flags "eventbus-auth-file" }}
{{- fail "flags.eventbus-auth-file is set by the chart from eventBusAuth.existingSecret (the EventBus accessSecret); remove it from flags" }}
{{- end }}
{{- if .Values.eventBusAuth.existingSecret }}
{{- if not (index .Values.flags "eventbus-url") }}
{{- fail "eventBusAuth.existingSecret needs flags.eventbus-url (the direct EventBus subscription it authenticates)" }}
{{- end }}
{{- if or (index .Values.flags "eventbus-token-file") (index .Values.flags "eventbus-user") (index .Values.flags "eventbus-password-file") }}
{{- fail "eventBusAuth.existingSecret holds the EventBus credentials: unset flags.eventbus-token-file, flags.eventbus-user and flags.eventbus-password-file" }}
{{- end }}
{{- end }}
{{- $np := .Values.networkPolicy }}
{{- if $np.enabled }}
{{- if and $np.egress.enabled (not $np.egress.apiServer.cidrs) }}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.egress.apiServer.cidrs (the apiserver's endpoint addresses: kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes), else the service cannot reach the apiserver" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not $np.metricsFrom) }}
{{- fail "serviceMonitor.enabled with networkPolicy.enabled needs networkPolicy.metricsFrom (Prometheus' pods or namespace), else the NetworkPolicy blocks the scrape" }}
{{- end }}
{{- end }}
{{- end }}
