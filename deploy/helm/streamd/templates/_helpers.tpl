{{/* Names, labels and the values the templates derive. */}}

{{- define "streamd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "streamd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "streamd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "streamd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "streamd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "streamd.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | replace "+" "_") -}}
{{- end -}}
{{- end -}}

{{- define "streamd.adminSecretName" -}}
{{- default (printf "%s-admin" (include "streamd.fullname" .)) .Values.admin.auth.existingSecret -}}
{{- end -}}

{{- define "streamd.scheme" -}}
{{- if .Values.admin.tlsSecret -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/*
streamd.toml: data_dir, then .Values.config, then [admin]. The user's part
must leave data_dir and [admin] to the chart (its top-level keys, before
the first table, would otherwise be the chart's), and must not give every
instance one fixed instance_id (they would fence each other).
*/}}
{{- define "streamd.config" -}}
{{- $cfg := .Values.config -}}
{{- $top := regexReplaceAll "(?ms)^[ \\t]*\\[.*" $cfg "" -}}
{{- if regexMatch "(?m)^[ \\t]*data_dir[ \\t]*=" $top -}}
{{- fail "config: leave data_dir out: the chart sets it to the pod's volume (/var/lib/streamd)" -}}
{{- end -}}
{{- if regexMatch "(?m)^[ \\t]*\\[[ \\t]*admin[ \\t]*[.\\]]" $cfg -}}
{{- fail "config: leave [admin] out: the chart writes it (set admin.* in the values; admin.extraConfig for more keys)" -}}
{{- end -}}
{{- range regexFindAll "(?m)^[ \\t]*instance_id[ \\t]*=[ \\t]*\"[^\"]*\"" $cfg -1 -}}
{{- $id := regexReplaceAll "^[^\"]*\"([^\"]*)\"$" . "${1}" -}}
{{- if not (or (eq $id "auto") (eq $id "") (contains "${" $id)) -}}
{{- fail (printf "config: instance_id = %q would be the ID of every instance, and they would fence each other: leave it out (\"auto\": one per pod, kept on its volume) or derive it from ${POD_NAME}" $id) -}}
{{- end -}}
{{- end -}}
# Written by the streamd chart: data_dir, your config (the chart's value
# "config"), then [admin].
data_dir = "/var/lib/streamd"

{{ trim $cfg }}

# ---- [admin], from the chart's admin.* values
[admin]
listen = "0.0.0.0:{{ .Values.admin.port }}"
{{- with .Values.admin.extraConfig }}
{{ trim . }}
{{- end }}
[admin.auth]
tokens_file = "/etc/streamd/admin/tokens"
{{- if .Values.admin.tlsSecret }}
[admin.tls]
cert_file = "/etc/streamd/admin-tls/tls.crt"
key_file = "/etc/streamd/admin-tls/tls.key"
{{- end }}
{{- end -}}

{{/*
The largest shutdown_timeout in config, in whole seconds (30, the
default, when none is larger). A Go duration: a sequence of decimal numbers
with units h, m, s, ms, us, µs, ns. A commented-out line counts too (the
grace period is then longer than needed, never shorter).
*/}}
{{- define "streamd.maxShutdownSeconds" -}}
{{- $max := 30.0 -}}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- range regexFindAll "shutdown_timeout[ \\t]*=[ \\t]*\"[^\"]*\"" .Values.config -1 -}}
{{- $d := regexReplaceAll "^[^\"]*\"([^\"]*)\"$" . "${1}" -}}
{{- $secs := 0.0 -}}
{{- range regexFindAll "[0-9]*\\.?[0-9]+(ns|us|µs|ms|h|m|s)" $d -1 -}}
{{- $num := regexFind "^[0-9]*\\.?[0-9]+" . | float64 -}}
{{- $unit := regexReplaceAll "^[0-9]*\\.?[0-9]+" . "" -}}
{{- $secs = addf $secs (mulf $num (get $units $unit)) -}}
{{- end -}}
{{- if gt $secs $max -}}{{- $max = $secs -}}{{- end -}}
{{- end -}}
{{- ceil $max | int -}}
{{- end -}}

{{- define "streamd.terminationGracePeriodSeconds" -}}
{{- $need := add (include "streamd.maxShutdownSeconds" . | int) 30 -}}
{{- if not .Values.terminationGracePeriodSeconds -}}
{{- $need -}}
{{- else if lt (int .Values.terminationGracePeriodSeconds) $need -}}
{{- fail (printf "terminationGracePeriodSeconds: %d is below the largest shutdown_timeout in config plus 30s (%d): Kubernetes would kill a drain that was going to finish" (int .Values.terminationGracePeriodSeconds) $need) -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}
