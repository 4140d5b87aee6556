"""${message}

Create Date: ${create_date}

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

# revision identifiers, used by Alembic (they are stated here only; branch_labels and depends_on
# default to None)
revision: str = ${repr(up_revision)}
down_revision: Union[str, Sequence[str], None] = ${repr(down_revision)}
% if branch_labels:
branch_labels: Union[str, Sequence[str], None] = ${repr(branch_labels)}
% endif
% if depends_on:
depends_on: Union[str, Sequence[str], None] = ${repr(depends_on)}
% endif


def upgrade() -> None:
    """Upgrade schema."""
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    """Downgrade schema."""
    ${downgrades if downgrades else "pass"}
