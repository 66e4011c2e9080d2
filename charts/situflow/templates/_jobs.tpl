{{/*
The jobs' shared pieces (job-*.yaml, cronjob-*.yaml): their pod, the stream a query names,
the Spark image and the Spark arguments. A job's steps run one after another, as init
containers and then the main container, so that each step has its own arguments (no shell)
and its own log (`kubectl logs job/<name> -c <step>`).
*/}}

{{/*
The settings of the stream of .Values.streams named .name (dict root, name, what: who names
it, for the error) as its services see them (situflow.settingsEnv: the stream's own keys, its
settings, the global settings), with the services' defaults; YAML for fromYaml. The render
fails naming an unknown stream.
*/}}
{{- define "situflow.jobs.stream" -}}
{{- $found := dict }}
{{- range .root.Values.streams }}
{{- if eq .name $.name }}{{ $found = . }}{{ end }}
{{- end }}
{{- if not $found }}
{{- fail (printf "%s names the stream %q, which is not in streams" .what .name) }}
{{- end }}
{{- $defaults := dict "partitions" 4 "timeField" "ts" "timeUnit" 1.0 "situationsTopic" "situations" "unpartitioned" false "keyFields" list }}
{{- $own := omit $found "settings" }}
{{- toYaml (merge (dict) $own (deepCopy ($found.settings | default dict)) (deepCopy (.root.Values.settings | default dict)) $defaults) }}
{{- end }}

{{/*
A job resource's name (dict root, suffix, max: 63 or, for a CronJob, 52, since its Jobs add
11 characters): the release's full name shortened so that the suffix fits whole.
*/}}
{{- define "situflow.jobs.name" -}}
{{- $max := .max | default 63 | int }}
{{- $suffix := .suffix | trunc (sub $max 12 | int) | trimSuffix "-" }}
{{- $base := include "situflow.fullname" .root | trunc (sub $max (add 1 (len $suffix)) | int) | trimSuffix "-" }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{/* Where the archive's claim is mounted: the archiver's SITUFLOW_ARCHIVE_DIR. */}}
{{- define "situflow.jobs.archiveDir" -}}
/var/lib/situflow-archive
{{- end }}

{{/* The query file of an entry of .Values.queries in the queries ConfigMap. */}}
{{- define "situflow.jobs.queryFile" -}}
{{- printf "%s.query" . }}
{{- end }}

{{/* Where the queries ConfigMap is mounted. */}}
{{- define "situflow.jobs.queriesDir" -}}
/etc/situflow/queries
{{- end }}

{{/*
The query file a run uses (dict root, run, what): its own text (in the ConfigMap as
run-<name>.query) or an entry of .Values.queries by name.
*/}}
{{- define "situflow.jobs.runQueryFile" -}}
{{- if .run.text }}
{{- printf "%s/run-%s" (include "situflow.jobs.queriesDir" .) (include "situflow.jobs.queryFile" .run.name) }}
{{- else }}
{{- $names := list }}
{{- range .root.Values.queries }}{{ $names = append $names .name }}{{ end }}
{{- if not (has .run.query $names) }}
{{- fail (printf "%s: query %q is not in queries (or give the run a text)" .what (toString .run.query)) }}
{{- end }}
{{- printf "%s/%s" (include "situflow.jobs.queriesDir" .) (include "situflow.jobs.queryFile" .run.query) }}
{{- end }}
{{- end }}

{{/* The query name of a run: the registered query's, so results carry its ids. */}}
{{- define "situflow.jobs.runQueryName" -}}
{{- if .text }}{{ .name }}{{ else }}{{ .query }}{{ end }}
{{- end }}

{{/* The image of the Spark jobs: the services' image, tag + spark.tagSuffix. */}}
{{- define "situflow.jobs.sparkImage" -}}
{{- include "situflow.image" . }}{{ .Values.spark.tagSuffix }}
{{- end }}

{{/* "true" when the Spark master is Kubernetes (executor pods, spark-submit). */}}
{{- define "situflow.jobs.sparkOnKubernetes" -}}
{{- if hasPrefix "k8s://" .Values.spark.master }}true{{ end }}
{{- end }}

{{/* Whether any Spark job is on: "true" or "". */}}
{{- define "situflow.jobs.sparkUsed" -}}
{{- if or (and .Values.jobs.indexBuild.enabled .Values.jobs.indexBuild.indexes) .Values.jobs.offline.runs }}true{{ end }}
{{- end }}

{{/* Whether the queries ConfigMap has any file: "true" or "". */}}
{{- define "situflow.jobs.queryFilesUsed" -}}
{{- $runs := concat .Values.jobs.offline.runs .Values.jobs.backfill.runs }}
{{- if .Values.queries }}true{{ end }}
{{- range $runs }}{{ if .text }}true{{ end }}{{ end }}
{{- end }}

{{/* The environment Spark runs in; every writable path is under /tmp (an emptyDir). */}}
{{- define "situflow.jobs.sparkEnv" -}}
- name: SPARK_CONF_DIR
  value: /etc/situflow/spark
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- if include "situflow.jobs.sparkOnKubernetes" . }}
# Executors reach a client-mode driver at its pod's address (the pod name resolves nowhere).
- name: PYSPARK_SUBMIT_ARGS
  value: --conf spark.driver.host=$(POD_IP) pyspark-shell
{{- end }}
{{- end }}

{{/*
One Spark step (dict root, name, args: the situflow command's arguments, submit: "true" when
spark-submit may run it through batch/submit.py, i.e. `situflow offline`). On a k8s:// master
an offline run goes through spark-submit (client mode: the driver stays in the job's pod);
otherwise the command takes --master itself.
*/}}
{{- define "situflow.jobs.sparkStep" -}}
{{- $spark := .root.Values.spark }}
{{- if and .submit (include "situflow.jobs.sparkOnKubernetes" .root) }}
{{- $submit := list "--master" $spark.master "--deploy-mode" "client"
      "--conf" "spark.driver.host=$(POD_IP)" $spark.submitScript }}
{{- toYaml (dict "name" .name "command" (list "spark-submit") "args" (concat $submit (rest .args))) }}
{{- else }}
{{- toYaml (dict "name" .name "args" (concat .args (list "--master" $spark.master))) }}
{{- end }}
{{- end }}

{{/*
A job's pod template (dict root, component, image, steps: list of dict name args, kafka,
archive, queries, spark: what the steps need; preInstall: runs before the release exists).
Pods run as the services do: non-root, a read-only root file system, every writable path
under /tmp.
*/}}
{{- define "situflow.jobs.podTemplate" -}}
{{- $root := .root }}
{{- $jobs := $root.Values.jobs }}
{{- $steps := .steps }}
{{- $ctx := . -}}
metadata:
  labels:
    {{- include "situflow.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  restartPolicy: Never
  {{- if not .preInstall }}
  {{- /* A pre-install hook runs before the release's ServiceAccount exists. */}}
  serviceAccountName: {{ include "situflow.serviceAccountName" $root }}
  {{- end }}
  automountServiceAccountToken: {{ and .spark (eq (include "situflow.jobs.sparkOnKubernetes" $root) "true") }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  {{- with $jobs.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $jobs.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $jobs.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if gt (len $steps) 1 }}
  initContainers:
    {{- range initial $steps }}
    {{- include "situflow.jobs.container" (dict "ctx" $ctx "step" .) | nindent 4 }}
    {{- end }}
  {{- end }}
  containers:
    {{- include "situflow.jobs.container" (dict "ctx" $ctx "step" (last $steps)) | nindent 4 }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: {{ $root.Values.tmp.sizeLimit }}
    {{- if .kafka }}
    {{- include "situflow.kafkaVolumes" $root | nindent 4 }}
    {{- end }}
    {{- if and .archive $root.Values.archive.existingClaim }}
    - name: archive
      persistentVolumeClaim:
        claimName: {{ $root.Values.archive.existingClaim }}
    {{- end }}
    {{- if .queries }}
    - name: queries
      configMap:
        name: {{ include "situflow.jobs.name" (dict "root" $root "suffix" "queries") }}
    {{- end }}
    {{- if .spark }}
    - name: spark-conf
      configMap:
        name: {{ include "situflow.jobs.name" (dict "root" $root "suffix" "spark") }}
    {{- end }}
{{- end }}

{{/* One step of a job's pod (dict ctx: the podTemplate's dict, step: dict name args). */}}
{{- define "situflow.jobs.container" -}}
{{- $ctx := .ctx }}
{{- $root := $ctx.root -}}
- name: {{ .step.name }}
  image: {{ $ctx.image }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  {{- with .step.command }}
  command:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  args:
    {{- toYaml .step.args | nindent 4 }}
  {{- if or $ctx.kafka $ctx.spark $root.Values.extraEnv }}
  env:
    {{- if $ctx.kafka }}
    {{- include "situflow.kafkaEnv" $root | nindent 4 }}
    {{- end }}
    {{- if $ctx.spark }}
    {{- include "situflow.jobs.sparkEnv" $root | nindent 4 }}
    {{- end }}
    {{- with $root.Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  {{- if and $ctx.archive $root.Values.archive.existingSecret }}
  envFrom:
    - secretRef:
        name: {{ $root.Values.archive.existingSecret }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.securityContext | nindent 4 }}
  {{- with $root.Values.jobs.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- if $ctx.kafka }}
    {{- include "situflow.kafkaVolumeMounts" $root | nindent 4 }}
    {{- end }}
    {{- if and $ctx.archive $root.Values.archive.existingClaim }}
    - name: archive
      mountPath: {{ include "situflow.jobs.archiveDir" $root }}
    {{- end }}
    {{- if $ctx.queries }}
    - name: queries
      mountPath: {{ include "situflow.jobs.queriesDir" $root }}
      readOnly: true
    {{- end }}
    {{- if $ctx.spark }}
    - name: spark-conf
      mountPath: /etc/situflow/spark
      readOnly: true
    {{- end }}
{{- end }}

{{/* A container name from a resource-name-unsafe name (dict prefix, index, name). */}}
{{- define "situflow.jobs.stepName" -}}
{{- printf "%s-%d-%s" .prefix (int .index) (include "situflow.streamId" .name) | trunc 63 | trimSuffix "-" }}
{{- end }}
