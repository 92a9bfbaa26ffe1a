package eventbus

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// ReadAuthFile reads EventBus credentials in the format Argo Events gives its own
// clients: the JetStream EventBus's accessSecret (key client-auth of the Secret
// eventbus-NAME-js-client-auth) holds YAML with username and password, or a token, and
// Argo mounts it as /etc/eventbus/auth/auth.yaml. Errors name the file, never its
// content.
func ReadAuthFile(path string) (Auth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Auth{}, fmt.Errorf("EventBus auth file: %w", err)
	}
	var raw struct {
		Token    string `json:"token"`
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := yaml.UnmarshalStrict(b, &raw); err != nil {
		return Auth{}, fmt.Errorf("EventBus auth file %s: not the YAML of an Argo Events accessSecret (token, or username and password)", path)
	}
	a := Auth{Token: strings.TrimSpace(raw.Token), User: strings.TrimSpace(raw.Username), Password: strings.TrimSpace(raw.Password)}
	switch {
	case a.Token != "" && (a.User != "" || a.Password != ""):
		return Auth{}, fmt.Errorf("EventBus auth file %s: holds a token and a username/password; keep one", path)
	case a.Token == "" && (a.User == "") != (a.Password == ""):
		return Auth{}, fmt.Errorf("EventBus auth file %s: username and password go together", path)
	case a.Token == "" && a.User == "":
		return Auth{}, errors.New("EventBus auth file " + path + ": holds no credentials")
	}
	return a, nil
}
