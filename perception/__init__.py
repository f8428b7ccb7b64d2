"""Perception: the few-shot OOI detector, OD masks, the masked inverse-dynamics feature encoder."""
