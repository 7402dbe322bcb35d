"""infra: Terraform-style plans and applies for distributed GPU training on Azure Machine Learning."""

__version__ = "0.1.0"
