# In a production workspace, a GPU distribution across nodes runs only on a cluster that says
# `infiniband: required` (so infra refuses a size without usable InfiniBand instead of warning about it).
# Input: the plan JSON (`infra plan STACK --json`): `workspace`, and `configuration`, the stack as declared.
package main

import rego.v1

# which workspaces are production: edit to match your naming
production_workspace if regex.match(`(^|[-_])prod([-_]|$)`, input.workspace.name)

# Azure's GPU sizes are the N family (Standard_NC..., Standard_ND..., Standard_NV...)
gpu_size(size) if startswith(lower(size), "standard_n")

deny contains msg if {
	input.mode != "destroy"   # the configuration is judged for what it will run, not while it goes away
	production_workspace
	some name, dist in input.configuration.distributions
	dist.instance_count > 1
	cluster := input.configuration.clusters[dist.cluster]
	gpu_size(cluster.size)
	object.get(cluster, "infiniband", "optional") != "required"
	msg := sprintf(
		"distribution.%s runs on %d nodes of cluster.%s (%s) in production workspace %s: the cluster must say `infiniband: required`",
		[name, dist.instance_count, dist.cluster, cluster.size, input.workspace.name],
	)
}
