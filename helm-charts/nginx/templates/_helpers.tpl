{{/*
Name of every object of the release: the release name (the custom resource's
name when the operator installs the chart), truncated to the 63 characters a
label value and a DNS label allow.
*/}}
{{- define "nginx.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Chart name and version, as in the helm.sh/chart label. */}}
{{- define "nginx.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Every value a template interpolates goes through quote (a string), toYaml (a
structure) or int (a number): a value holding a line break and a "---" must
stay one string of one object, never become YAML of its own (another key,
another object, another namespace). values.schema.json constrains what can
be a name on top, and the operator holds the release to its namespace
whatever a chart does (docs/tenancy.md, "Values cannot break out").
*/}}

{{/* Labels that select the pods; they never change after install. */}}
{{- define "nginx.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{/* Standard labels of every object. */}}
{{- define "nginx.labels" -}}
helm.sh/chart: {{ include "nginx.chart" . | quote }}
{{ include "nginx.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/component: web
app.kubernetes.io/part-of: {{ .Chart.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{/* Name of the ServiceAccount the pods run as. */}}
{{- define "nginx.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "nginx.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/*
The container image: image.reference when set (the operator sets it from its
RELATED_IMAGE_NGINX variable, so that a mirror or a digest can replace it),
else image.repository:image.tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "nginx.image" -}}
{{- if .Values.image.reference -}}
{{- .Values.image.reference -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The page served at "/", the data of the ConfigMap; title and body are
HTML-escaped. The ConfigMap quotes it whole.
*/}}
{{- define "nginx.page" -}}
<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>{{ .Values.page.title | html }}</title>
</head>
<body>
<h1>{{ .Values.page.title | html }}</h1>
<p>{{ .Values.page.body | html }}</p>
</body>
</html>
{{ end -}}
