{{/*
The chart's vocabulary: names, labels and the service account, as the prometheus-community
charts spell them. Workloads (one per stream and service) are in _workload.tpl, the
containers' environment in _env.tpl.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "situflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's base name, at most 63 characters (a DNS label). A release whose name already
holds the chart name is not repeated ("situflow", not "situflow-situflow").
*/}}
{{- define "situflow.fullname" -}}
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

{{/* name-version, as the helm.sh/chart label. */}}
{{- define "situflow.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The namespace of every resource: the release's, or namespaceOverride. */}}
{{- define "situflow.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What selects the release's pods; never the chart version, which changes on upgrade. */}}
{{- define "situflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "situflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every resource. */}}
{{- define "situflow.labels" -}}
helm.sh/chart: {{ include "situflow.chart" . }}
{{ include "situflow.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: situflow
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The service account the pods run as. */}}
{{- define "situflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "situflow.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image of the services and commands (tag: the chart's appVersion by default). */}}
{{- define "situflow.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
A stream's name as a DNS label part: topic names may hold "." and "_", resource names may not.
*/}}
{{- define "situflow.streamId" -}}
{{- . | lower | replace "." "-" | replace "_" "-" | trunc 30 | trimSuffix "-" }}
{{- end }}

{{/*
The name of one stream's workload of one service (dict root, stream, service): at most 52
characters, because a StatefulSet's pods carry a controller-revision-hash label of the name
plus 11 characters, and a label value holds 63.
*/}}
{{- define "situflow.workloadName" -}}
{{- $base := include "situflow.fullname" .root | trunc 20 | trimSuffix "-" }}
{{- printf "%s-%s-%s" $base (include "situflow.streamId" .stream.name) .service | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of one stream's workload of one service (dict root, stream, service). */}}
{{- define "situflow.workloadSelectorLabels" -}}
{{ include "situflow.selectorLabels" .root }}
app.kubernetes.io/component: {{ .service }}
situflow.io/stream: {{ include "situflow.streamId" .stream.name }}
{{- end }}

{{/* Labels of one stream's workload of one service (dict root, stream, service). */}}
{{- define "situflow.workloadLabels" -}}
{{ include "situflow.labels" .root }}
app.kubernetes.io/component: {{ .service }}
situflow.io/stream: {{ include "situflow.streamId" .stream.name }}
{{- end }}

{{/*
Whether a service runs for a stream (dict root, stream, service): "true" or "". trends runs
only on partitioned streams (COGRA needs each key's events in one partition).
*/}}
{{- define "situflow.runs" -}}
{{- $values := index .root.Values .service }}
{{- if and $values.enabled (or (ne .service "trends") (not .stream.unpartitioned)) }}true{{ end }}
{{- end }}

{{/* The services the chart runs, in pipeline order. */}}
{{- define "situflow.services" -}}
kslack deriver matcher trends archiver
{{- end }}
