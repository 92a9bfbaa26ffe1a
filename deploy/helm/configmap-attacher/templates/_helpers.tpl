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

{{/* "true" when leader election is on: leaderElection.enabled true, or "auto" with more than one replica. */}}
{{- define "cma.leaderElection" -}}
{{- $e := .Values.leaderElection.enabled }}
{{- if or (eq (toString $e) "true") (and (eq (toString $e) "auto") (gt (int .Values.replicaCount) 1)) }}true{{ end }}
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
{{- if .Values.tls.enabled }}
- --tls-cert-file=/etc/configmap-attacher/tls/tls.crt
- --tls-key-file=/etc/configmap-attacher/tls/tls.key
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
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
