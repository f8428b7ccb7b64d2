"""The built-in park scenario: a seeded UDMF map for ViZDoom with objects of interest to test."""

from playtester.capture.park.build import ParkFiles, build_park
from playtester.capture.park.layout import OOI, OOI_KINDS, ParkConfig, ParkLayout, generate_park

__all__ = ["OOI", "OOI_KINDS", "ParkConfig", "ParkFiles", "ParkLayout", "build_park", "generate_park"]
