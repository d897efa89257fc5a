package tags_test

import (
	"fmt"

	"github.com/legateproxy/legate/stats/tags"
)

func ExampleProducer_Extract() {
	p, err := tags.New(tags.Config{Fixed: []tags.Tag{{Name: "region", Value: "eu"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	name, ts := p.Extract("listener.0.0.0.0_10000.http.ingress_http.downstream_rq_2xx", nil)
	fmt.Println(name)
	for _, t := range ts {
		fmt.Printf("%s=%s\n", t.Name, t.Value)
	}
	// Output:
	// listener.http.downstream_rq_xx
	// envoy.response_code_class=2
	// region=eu
	// envoy.http_conn_manager_prefix=ingress_http
	// envoy.listener_address=0.0.0.0_10000
}

func ExampleNew_badRegex() {
	_, err := tags.New(tags.Config{Custom: []tags.Spec{{TagName: "x", Regex: `^a(b`}}})
	fmt.Println(err)
	// Output:
	// stats_config.stats_tags[0].regex = "^a(b": must be a valid ECMAScript regular expression: error parsing regexp: missing closing ) in `^a(b`
}
