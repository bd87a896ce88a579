{{/* Name of every object of the release: the release name, truncated to 63 characters. */}}
{{- define "echo.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Every value a template interpolates goes through quote (a string) or int (a
number), so that a value holding a line break and a "---" stays one string of
one object (docs/tenancy.md, "Values cannot break out").
*/}}

{{/* Labels that select the pods; they never change after install. */}}
{{- define "echo.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{/* Standard labels of every object. */}}
{{- define "echo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{ include "echo.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{/*
The container image: image.reference when set (the operator sets it from its
RELATED_IMAGE_ECHO variable, so that a mirror or a digest can replace it),
else image.repository:image.tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "echo.image" -}}
{{- if .Values.image.reference -}}
{{- .Values.image.reference -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}
