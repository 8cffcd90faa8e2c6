"""Exporting a trained model to other inference engines (CTranslate2)."""
