# Nobody asks for more than 8 nodes without a review: a cluster planned with more is denied.
package main

import rego.v1

max_nodes_without_review := 8

deny contains msg if {
	some rc in input.resource_changes
	rc.type == "cluster"
	rc.change.after != null
	rc.change.after.max_instances > max_nodes_without_review
	msg := sprintf("%s asks for max_instances %d: more than %d nodes needs a review (ask the platform team)",
		[rc.address, rc.change.after.max_instances, max_nodes_without_review])
}
