"""Views: what the engines return, drawn for a person (terminal text, HTML) or as JSON, as Terraform's
command/views draws its engines' results. The engines print nothing."""
