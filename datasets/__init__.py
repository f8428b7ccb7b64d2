"""On-disk formats: demo episodes, COCO detection shots, test plans (`plans.py`), and the data modules that read them."""
