package cluster

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// ArgoCDAWSAuthCommand is the credential plugin Argo CD runs for a cluster Secret's
// awsAuthConfig (EKS): its own argocd-k8s-auth binary, with the arguments
// "aws --cluster-name NAME [--role-arn ARN] [--profile PROFILE]". Here it is a credential
// plugin like any other: it runs only when the operator allows it (serve
// --allow-exec-plugin argocd-k8s-auth), see docs/safety.md.
const ArgoCDAWSAuthCommand = "argocd-k8s-auth"

// argoAWSAuthConfig is Argo CD's v1alpha1.AWSAuthConfig.
type argoAWSAuthConfig struct {
	ClusterName string `json:"clusterName,omitempty"`
	RoleARN     string `json:"roleARN,omitempty"`
	Profile     string `json:"profile,omitempty"`
}

// maxAWSAuthValue bounds each awsAuthConfig field (an EKS cluster name is at most 100
// characters, a role ARN 2048).
const maxAWSAuthValue = 2048

// execProvider returns the Secret config's credential plugin, if any, and the key it
// comes from (for errors): execProviderConfig as written, or awsAuthConfig translated
// as Argo CD does (awsExecProvider). A Secret setting both is refused: Argo CD would
// silently prefer awsAuthConfig.
func execProvider(cc argoClusterConfig) (string, *argoExecProvider, error) {
	const execKey, awsKey = `"config".execProviderConfig`, `"config".awsAuthConfig`
	switch {
	case cc.AWSAuthConfig != nil && cc.ExecProviderConfig != nil:
		return "", nil, errors.New(`"config" sets both awsAuthConfig and execProviderConfig: set one`)
	case cc.AWSAuthConfig != nil:
		e, err := awsExecProvider(cc.AWSAuthConfig)
		return awsKey, e, err
	}
	return execKey, cc.ExecProviderConfig, nil
}

// awsExecProvider translates awsAuthConfig into Argo CD's exec configuration:
// argocd-k8s-auth aws --cluster-name NAME [--role-arn ARN] [--profile PROFILE]. Every
// value is untrusted and becomes an argument of its own, so each is checked: none may
// be empty (clusterName is required), start with '-' (it would be read as an option),
// or contain whitespace or control characters.
func awsExecProvider(a *argoAWSAuthConfig) (*argoExecProvider, error) {
	args := []string{"aws"}
	for _, f := range []struct {
		key, flag, value string
		required         bool
	}{
		{"clusterName", "--cluster-name", a.ClusterName, true},
		{"roleARN", "--role-arn", a.RoleARN, false},
		{"profile", "--profile", a.Profile, false},
	} {
		if f.value == "" && !f.required {
			continue
		}
		if err := checkAWSAuthValue(f.value); err != nil {
			return nil, fmt.Errorf(`"config".awsAuthConfig.%s: %w`, f.key, err)
		}
		args = append(args, f.flag, f.value)
	}
	return &argoExecProvider{Command: ArgoCDAWSAuthCommand, Args: args, APIVersion: "client.authentication.k8s.io/v1beta1"}, nil
}

// checkAWSAuthValue checks one awsAuthConfig value (awsExecProvider).
func checkAWSAuthValue(v string) error {
	switch {
	case v == "":
		return errors.New("is required")
	case len(v) > maxAWSAuthValue:
		return fmt.Errorf("is %d characters long, at most %d are allowed", len(v), maxAWSAuthValue)
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("%q starts with '-' (it would be read as an option)", core.Clip(v))
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError }) >= 0:
		return fmt.Errorf("%q contains whitespace or control characters", core.Clip(v))
	}
	return nil
}
