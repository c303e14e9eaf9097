package deploy_test

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The KEDA resources the manifests use, written from KEDA's CRD schemas
// (config/crd/bases/keda.sh_scaledobjects.yaml and
// keda.sh_triggerauthentications.yaml in kedacore/keda), reduced to the
// fields ehsink's manifests may set: a strict decode rejects any other
// field, and so any misspelt one. KEDA's Go module would bring the
// controller runtime with it; these few types do not.

// scaledObject is keda.sh/v1alpha1 ScaledObject.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef   scaleTarget     `json:"scaleTargetRef"`
	MinReplicaCount  *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount  *int32          `json:"maxReplicaCount,omitempty"`
	IdleReplicaCount *int32          `json:"idleReplicaCount,omitempty"`
	PollingInterval  *int32          `json:"pollingInterval,omitempty"`
	CooldownPeriod   *int32          `json:"cooldownPeriod,omitempty"`
	Advanced         *advancedConfig `json:"advanced,omitempty"`
	Fallback         *fallback       `json:"fallback,omitempty"`
	Triggers         []scaleTriggers `json:"triggers"`
}

type scaleTarget struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
}

type advancedConfig struct {
	HorizontalPodAutoscalerConfig *hpaConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool       `json:"restoreToOriginalReplicaCount,omitempty"`
}

type hpaConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	Name     string                                         `json:"name,omitempty"`
}

type fallback struct {
	FailureThreshold int32 `json:"failureThreshold"`
	Replicas         int32 `json:"replicas"`
}

type scaleTriggers struct {
	Type              string             `json:"type"`
	Name              string             `json:"name,omitempty"`
	Metadata          map[string]string  `json:"metadata"`
	AuthenticationRef *authenticationRef `json:"authenticationRef,omitempty"`
	MetricType        string             `json:"metricType,omitempty"`
}

type authenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"` // TriggerAuthentication (default) or ClusterTriggerAuthentication
}

// triggerAuthentication is keda.sh/v1alpha1 TriggerAuthentication.
type triggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              triggerAuthenticationSpec `json:"spec"`
}

type triggerAuthenticationSpec struct {
	SecretTargetRef []authSecretTargetRef `json:"secretTargetRef,omitempty"`
	PodIdentity     *authPodIdentity      `json:"podIdentity,omitempty"`
}

type authSecretTargetRef struct {
	Parameter string `json:"parameter"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

type authPodIdentity struct {
	Provider   string `json:"provider"`
	IdentityID string `json:"identityId,omitempty"`
}

// kustomization is the part of kustomize's Kustomization the manifests use.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}
