"""(filled in by issue 16's routes)"""

from fastapi import APIRouter

router = APIRouter()
