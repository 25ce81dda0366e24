package helm

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The custom resources the chart renders, as small structs that mirror the
// documented schemas of their CRDs (KEDA 2.x keda.sh/v1alpha1; the
// Prometheus Operator's monitoring.coreos.com/v1). The chart's objects are
// decoded into them strictly, so a misspelt or misplaced field fails as it
// would when the API server validates it against the CRD.

// scaledObject is KEDA's ScaledObject (keda.sh/v1alpha1).
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Fallback              *struct {
			FailureThreshold int32  `json:"failureThreshold"`
			Replicas         int32  `json:"replicas"`
			Behavior         string `json:"behavior,omitempty"`
		} `json:"fallback,omitempty"`
		Advanced *struct {
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			MetricType        string            `json:"metricType,omitempty"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// triggerAuthentication is KEDA's TriggerAuthentication (keda.sh/v1alpha1).
type triggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef,omitempty"`
		Env []struct {
			Parameter     string `json:"parameter"`
			Name          string `json:"name"`
			ContainerName string `json:"containerName,omitempty"`
		} `json:"env,omitempty"`
		PodIdentity *struct {
			Provider string `json:"provider"`
		} `json:"podIdentity,omitempty"`
	} `json:"spec"`
}

// serviceMonitor is the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1).
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		TargetLabels      []string             `json:"targetLabels,omitempty"`
		PodTargetLabels   []string             `json:"podTargetLabels,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		SampleLimit *uint64    `json:"sampleLimit,omitempty"`
		Endpoints   []endpoint `json:"endpoints"`
	} `json:"spec"`
}

type endpoint struct {
	Port            string            `json:"port,omitempty"`
	TargetPort      *string           `json:"targetPort,omitempty"`
	Path            string            `json:"path,omitempty"`
	Scheme          string            `json:"scheme,omitempty"`
	Params          map[string]string `json:"params,omitempty"`
	Interval        string            `json:"interval,omitempty"`
	ScrapeTimeout   string            `json:"scrapeTimeout,omitempty"`
	HonorLabels     bool              `json:"honorLabels,omitempty"`
	HonorTimestamps *bool             `json:"honorTimestamps,omitempty"`
	Authorization   *struct {
		Type        string                    `json:"type,omitempty"`
		Credentials *corev1.SecretKeySelector `json:"credentials,omitempty"`
	} `json:"authorization,omitempty"`
	BearerTokenSecret *corev1.SecretKeySelector `json:"bearerTokenSecret,omitempty"`
	TLSConfig         *struct {
		CA *struct {
			Secret    *corev1.SecretKeySelector    `json:"secret,omitempty"`
			ConfigMap *corev1.ConfigMapKeySelector `json:"configMap,omitempty"`
		} `json:"ca,omitempty"`
		Cert *struct {
			Secret    *corev1.SecretKeySelector    `json:"secret,omitempty"`
			ConfigMap *corev1.ConfigMapKeySelector `json:"configMap,omitempty"`
		} `json:"cert,omitempty"`
		KeySecret          *corev1.SecretKeySelector `json:"keySecret,omitempty"`
		ServerName         string                    `json:"serverName,omitempty"`
		InsecureSkipVerify bool                      `json:"insecureSkipVerify,omitempty"`
	} `json:"tlsConfig,omitempty"`
}
