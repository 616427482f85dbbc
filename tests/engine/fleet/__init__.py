"""Tests of engine/fleet/: index bundles built, verified, published, installed and watched for."""
