{{/*
One stream's workload of one service (dict root, stream, service): a StatefulSet, so that each
worker keeps its data volume (RocksDB, crash records) across restarts; values.yaml,
`persistence`, says why. The statefulset-<service>.yaml files render one per stream.
*/}}
{{- define "situflow.statefulset" -}}
{{- $root := .root }}
{{- $values := index $root.Values .service }}
{{- $gpu := and $root.Values.devices.gpu.enabled (has .service $root.Values.devices.gpu.services) }}
{{- $archive := eq .service "archiver" }}
{{- $archiveClaim := and $archive (not $root.Values.archive.existingClaim) }}
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ include "situflow.workloadName" . }}
  namespace: {{ include "situflow.namespace" $root }}
  labels:
    {{- include "situflow.workloadLabels" . | nindent 4 }}
spec:
  {{- if not $values.autoscaling.enabled }}
  replicas: {{ $values.replicas }}
  {{- end }}
  serviceName: {{ include "situflow.workloadName" . }}-headless
  # Workers join and leave their consumer group each on its own: no need to start in order.
  podManagementPolicy: Parallel
  {{- if or $root.Values.persistence.enabled $archiveClaim }}
  persistentVolumeClaimRetentionPolicy:
    {{- toYaml $root.Values.persistence.retentionPolicy | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "situflow.workloadSelectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "situflow.workloadLabels" . | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "situflow.serviceAccountName" $root }}
      automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- $podSecurity := $root.Values.podSecurityContext }}
      {{- if and $gpu $root.Values.devices.gpu.supplementalGroups }}
      {{- $groups := concat ($podSecurity.supplementalGroups | default list) $root.Values.devices.gpu.supplementalGroups | uniq }}
      {{- $podSecurity = merge (dict "supplementalGroups" $groups) $podSecurity }}
      {{- end }}
      securityContext:
        {{- toYaml $podSecurity | nindent 8 }}
      terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- $nodeSelector := $root.Values.nodeSelector }}
      {{- $tolerations := $root.Values.tolerations }}
      {{- if $gpu }}
      {{- $nodeSelector = merge (dict) $root.Values.devices.gpu.nodeSelector $root.Values.nodeSelector }}
      {{- $tolerations = concat $root.Values.tolerations $root.Values.devices.gpu.tolerations }}
      {{- end }}
      {{- with $nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .service }}
          image: {{ if $gpu }}{{ $root.Values.devices.gpu.image | default (printf "%s%s" (include "situflow.image" $root) $root.Values.devices.gpu.tagSuffix) }}{{ else }}{{ include "situflow.image" $root }}{{ end }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: ["serve", {{ .service | quote }}]
          ports:
            - name: http
              containerPort: {{ $root.Values.web.port }}
              protocol: TCP
          env:
            # First: the variables below refer to it.
            - name: POD_IP
              valueFrom:
                fieldRef:
                  fieldPath: status.podIP
            {{- include "situflow.settingsEnv" . | trim | nindent 12 }}
            - name: SITUFLOW_DATA_DIR
              value: /var/lib/situflow
            - name: SITUFLOW_WEB_BIND
              value: "0.0.0.0"
            - name: SITUFLOW_WEB_PORT
              value: {{ $root.Values.web.port | quote }}
            - name: SITUFLOW_WEB_ADVERTISE
              value: {{ printf "http://$(POD_IP):%v" $root.Values.web.port | quote }}
            - name: SITUFLOW_REGISTRY
              value: "1"
            {{- if $archive }}
            - name: SITUFLOW_ARCHIVE_DIR
              value: /var/lib/situflow-archive
            {{- end }}
            {{- if $gpu }}
            - name: SITUFLOW_DEVICE
              value: {{ $root.Values.devices.gpu.backend | quote }}
            {{- end }}
            {{- include "situflow.kafkaEnv" $root | trim | nindent 12 }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          startupProbe:
            httpGet:
              path: /health
              port: http
            {{- toYaml $root.Values.startupProbe | nindent 12 }}
          livenessProbe:
            httpGet:
              path: /health
              port: http
            {{- toYaml $root.Values.livenessProbe | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /ready
              port: http
            {{- toYaml $root.Values.readinessProbe | nindent 12 }}
          {{- $resources := deepCopy ($values.resources | default dict) }}
          {{- if $gpu }}
          {{- $limits := $resources.limits | default dict }}
          {{- $_ := set $limits $root.Values.devices.gpu.resourceName $root.Values.devices.gpu.count }}
          {{- $_ = set $resources "limits" $limits }}
          {{- end }}
          {{- with $resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: data
              mountPath: /var/lib/situflow
            - name: tmp
              mountPath: /tmp
            {{- if $archive }}
            - name: archive
              mountPath: /var/lib/situflow-archive
            {{- end }}
            {{- with include "situflow.kafkaVolumeMounts" $root }}
            {{- trim . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: {{ $root.Values.tmp.sizeLimit }}
        {{- if not $root.Values.persistence.enabled }}
        - name: data
          emptyDir: {}
        {{- end }}
        {{- if and $archive $root.Values.archive.existingClaim }}
        - name: archive
          persistentVolumeClaim:
            claimName: {{ $root.Values.archive.existingClaim }}
        {{- end }}
        {{- with include "situflow.kafkaVolumes" $root }}
        {{- trim . | nindent 8 }}
        {{- end }}
  {{- if or $root.Values.persistence.enabled $archiveClaim }}
  # Only selector labels: a StatefulSet's claim templates cannot change on upgrade.
  volumeClaimTemplates:
    {{- if $root.Values.persistence.enabled }}
    - metadata:
        name: data
        labels:
          {{- include "situflow.workloadSelectorLabels" . | nindent 10 }}
      spec:
        accessModes:
          {{- toYaml $root.Values.persistence.accessModes | nindent 10 }}
        {{- with $root.Values.persistence.storageClassName }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests:
            storage: {{ $root.Values.persistence.size }}
    {{- end }}
    {{- if $archiveClaim }}
    - metadata:
        name: archive
        labels:
          {{- include "situflow.workloadSelectorLabels" . | nindent 10 }}
      spec:
        accessModes: [ReadWriteOnce]
        {{- with $root.Values.archive.persistence.storageClassName }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests:
            storage: {{ $root.Values.archive.persistence.size }}
    {{- end }}
  {{- end }}
{{- end }}
