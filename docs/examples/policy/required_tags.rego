# Every cluster carries an `owner` tag (denied without one); a `cost-center` tag is asked for (a warning).
package main

import rego.v1

planned_clusters contains rc if {
	some rc in input.resource_changes
	rc.type == "cluster"
	rc.change.after != null
}

deny contains msg if {
	some rc in planned_clusters
	not rc.change.after.tags.owner
	msg := sprintf("%s has no `owner` tag: add `tags: {owner: TEAM}` to the cluster", [rc.address])
}

warn contains msg if {
	some rc in planned_clusters
	not rc.change.after.tags["cost-center"]
	msg := sprintf("%s has no `cost-center` tag", [rc.address])
}
