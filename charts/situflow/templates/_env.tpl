{{/*
The containers' environment: the SITUFLOW_* settings of a stream's service and the KAFKA_*
connection (situflow/settings.py reads both; docs/settings.md lists them).
*/}}

{{/*
One setting as an environment value, as situflow reads it: booleans 1/0, lists
comma-separated, whole numbers without an exponent (values hold every number as a float).
*/}}
{{- define "situflow.settingValue" -}}
{{- if kindIs "bool" . }}{{ ternary "1" "0" . }}
{{- else if kindIs "slice" . }}{{ join "," . }}
{{- else if and (kindIs "float64" .) (eq (float64 (int64 .)) .) }}{{ int64 . }}
{{- else }}{{ . }}
{{- end }}
{{- end }}

{{/*
SITUFLOW_* of one stream's service (dict root, stream, service): the stream's own keys, then
its `settings`, then the global `settings`, the first given winning; each camelCase key is the
variable of its snake_case name.
*/}}
{{- define "situflow.settingsEnv" -}}
{{- $own := omit .stream "name" "settings" }}
{{- $settings := merge (dict) $own (deepCopy (.stream.settings | default dict)) (deepCopy (.root.Values.settings | default dict)) }}
- name: SITUFLOW_STREAM
  value: {{ .stream.name | quote }}
{{- range $key, $value := $settings }}
{{- if not (kindIs "invalid" $value) }}
- name: {{ printf "SITUFLOW_%s" (snakecase $key | upper) }}
  value: {{ include "situflow.settingValue" $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
KAFKA_* of every container, services and jobs alike (root context): addresses and protocol
from values, the SASL credentials from kafka.sasl.existingSecret, the TLS files from the mount
of situflow.kafkaVolumeMounts.
*/}}
{{- define "situflow.kafkaEnv" -}}
{{- $kafka := .Values.kafka }}
- name: KAFKA_BOOTSTRAP_SERVERS
  value: {{ $kafka.bootstrapServers | quote }}
- name: KAFKA_SECURITY_PROTOCOL
  value: {{ $kafka.securityProtocol | quote }}
{{- if hasPrefix "SASL_" $kafka.securityProtocol }}
{{- if not $kafka.sasl.existingSecret }}
{{- fail (printf "kafka.securityProtocol %s needs kafka.sasl.existingSecret: a Secret with the SASL user name and password" $kafka.securityProtocol) }}
{{- end }}
- name: KAFKA_SASL_MECHANISM
  value: {{ $kafka.sasl.mechanism | quote }}
- name: KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $kafka.sasl.existingSecret }}
      key: {{ $kafka.sasl.usernameKey }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $kafka.sasl.existingSecret }}
      key: {{ $kafka.sasl.passwordKey }}
{{- end }}
{{- if and (has $kafka.securityProtocol (list "SSL" "SASL_SSL")) $kafka.tls.existingSecret }}
{{- if $kafka.tls.caKey }}
- name: KAFKA_SSL_CAFILE
  value: {{ printf "%s/%s" (include "situflow.kafkaTlsPath" .) $kafka.tls.caKey | quote }}
{{- end }}
{{- if $kafka.tls.certKey }}
- name: KAFKA_SSL_CERTFILE
  value: {{ printf "%s/%s" (include "situflow.kafkaTlsPath" .) $kafka.tls.certKey | quote }}
- name: KAFKA_SSL_KEYFILE
  value: {{ printf "%s/%s" (include "situflow.kafkaTlsPath" .) $kafka.tls.keyKey | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* Where the TLS Secret is mounted. */}}
{{- define "situflow.kafkaTlsPath" -}}
/etc/situflow/kafka-tls
{{- end }}

{{/* Whether the TLS Secret is mounted (root context): "true" or "". */}}
{{- define "situflow.kafkaTls" -}}
{{- if and (has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL")) .Values.kafka.tls.existingSecret }}true{{ end }}
{{- end }}

{{/* The volume of the TLS Secret (root context); empty without TLS files. */}}
{{- define "situflow.kafkaVolumes" -}}
{{- if include "situflow.kafkaTls" . }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{/* The read-only mount of the TLS Secret (root context); empty without TLS files. */}}
{{- define "situflow.kafkaVolumeMounts" -}}
{{- if include "situflow.kafkaTls" . }}
- name: kafka-tls
  mountPath: {{ include "situflow.kafkaTlsPath" . }}
  readOnly: true
{{- end }}
{{- end }}
