"""The pipeline's top: ``analyze`` runs source → Architecture → fills → class → cost into a Report;
``diff`` compares two models."""
