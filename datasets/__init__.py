"""On-disk formats: demo episodes, COCO detection shots, and the data modules that read them."""
