{{- define "causes.securityContext" -}}
{{- if .Values.restricted }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  allowPrivilegeEscalation: false
  capabilities:
    drop: ["ALL"]
  seccompProfile:
    type: RuntimeDefault
{{- else }}
securityContext:
  privileged: true
{{- end }}
{{- end -}}
