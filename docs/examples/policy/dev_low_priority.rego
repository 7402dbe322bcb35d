# Dev workspaces train on low-priority nodes (a fraction of the dedicated price; preemptible).
package main

import rego.v1

dev_workspace if regex.match(`(^|[-_])dev([-_]|$)`, input.workspace.name)

deny contains msg if {
	dev_workspace
	some rc in input.resource_changes
	rc.type == "cluster"
	rc.change.after != null
	rc.change.after.tier != "low_priority"
	msg := sprintf("%s is %s in dev workspace %s: dev clusters use `tier: low_priority`",
		[rc.address, rc.change.after.tier, input.workspace.name])
}
